"""The one host package table (harness/host.py): its groups, what a ./lab command line needs,
and that ./lab can ask it with the system python, before the virtualenv exists (issue 32 §2)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from harness import arch, host

REPO = Path(__file__).resolve().parents[2]
# What the old `lab` table installed, by verb; each must still be in the one table.
OLD_LAB_BASE = {"qemu-system-x86", "qemu-utils", "mmdebstrap", "qemu-system-arm",
                "qemu-user-static", "e2fsprogs", "busybox-static", "kmod", "cpio", "dpkg",
                "gpgv", "openssh-client", "xz-utils", "zstd", "debian-archive-keyring"}
OLD_LAB_BUILD = {"make", "gcc", "flex", "bison", "bc", "git", "pkgconf", "ccache", "patch",
                 "gcc-aarch64-linux-gnu", "libelf-dev", "libssl-dev"}
OLD_LAB_SELFTEST = {"chromium", "gdb"}


def packages(*names: str) -> set[str]:
    groups = [host.group(n) for n in names]
    return {t.package for g in groups for t in g.tools} | {f.package for g in groups
                                                           for f in g.files}


def on_host(monkeypatch: pytest.MonkeyPatch, machine: str) -> None:
    monkeypatch.setattr(arch.platform, "machine", lambda: machine)


def test_every_tool_says_its_package_and_why() -> None:
    for name in (host.BASE, *host.EXTRA_GROUPS):
        g = host.group(name)
        assert g.name == name and g.why and g.tools
        for t in g.tools:
            assert t.command and t.why and t.package
            assert "_" not in t.package, t  # Debian package names have no underscore
        for f in g.files:
            assert f.path.startswith("/") and f.package and f.why
    with pytest.raises(KeyError, match="no host tool group 'nope'"):
        host.group("nope")


def test_what_the_old_lab_table_installed_is_in_the_one_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The drift of issue 32: ./lab installed zstd, xz, ccache and patch that host.py never
    named (initramfs.py runs zstd; tar needs xz for a linux-source .tar.xz)."""
    on_host(monkeypatch, "x86_64")
    assert OLD_LAB_BASE - {"xz-utils"} <= packages(host.BASE)
    assert "zstd" in {t.package for t in host.ALL_TOOLS}  # ./lab doctor lists it now
    assert OLD_LAB_BUILD | {"xz-utils"} <= packages("build")
    assert OLD_LAB_SELFTEST <= packages("selftest")
    # Only nice to have: ./lab installs them, a build does not fail without them.
    assert {t.command for t in host.BUILD_TOOLS if t.optional} == {"ccache", "patch"}


def test_arch_dependent_tools_follow_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    on_host(monkeypatch, "aarch64")
    build = {t.command: t.package for t in host.group("build").tools}
    assert build["x86_64-linux-gnu-gcc"] == "gcc-x86-64-linux-gnu"
    assert "aarch64-linux-gnu-gcc" not in build
    on_host(monkeypatch, "x86_64")
    build = {t.command: t.package for t in host.group("build").tools}
    assert build["aarch64-linux-gnu-gcc"] == "gcc-aarch64-linux-gnu"


def test_optional_tools_are_installed_not_required(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(host, "_path", lambda: str(tmp_path))
    ccache = next(t for t in host.BUILD_TOOLS if t.command == "ccache")
    host.require((ccache,))  # nothing raised
    assert host.missing((ccache,)) == [ccache]
    monkeypatch.setattr(host.os.path, "exists", lambda path: False)
    assert "ccache" in host.missing_packages(("build",))
    assert "libelf-dev" in host.missing_packages(("build",))
    assert "debian-archive-keyring" in host.missing_packages((host.BASE,))


@pytest.mark.parametrize("argv, groups", [
    ([], ("base",)),
    (["--help"], ("base",)),
    (["nope"], ("base",)),
    (["gc", "--dry-run"], ("base",)),
    (["run"], ("base",)),
    (["run", "--selftests"], ("base", "build")),
    (["run", "-k", "x", "--selftests=1"], ("base", "build")),
    (["run", "--selft"], ("base", "build")),                   # argparse takes a prefix
    (["run", "--", "--selftests"], ("base",)),                 # pytest's, not ours
    (["-v", "--lab-config", "build", "run"], ("base",)),       # a value, not the verb
    (["--lab-config", "x.yaml", "selftest"], ("base", "build", "selftest")),
    (["build", "--kernel", "k"], ("base", "build")),
    (["bench", "build", "--runs", "1"], ("base", "build")),    # a sub-command's needs
    (["bench", "boot", "--kernel", "build"], ("base",)),       # an option's value, not one
])
def test_groups_of_a_command_line(argv: list[str], groups: tuple[str, ...]) -> None:
    assert host.groups_for(argv) == groups


def write_verb(commands: Path, cli: Path, text: str) -> None:
    commands.mkdir(exist_ok=True)
    (commands / "fake_verb.py").write_text(text)
    cli.write_text('VERBS: tuple[str, ...] = ("fake-verb",)\n')


def test_a_verb_must_declare_what_it_needs(tmp_path: Path) -> None:
    commands, cli = tmp_path / "commands", tmp_path / "cli.py"
    write_verb(commands, cli, '"""doc"""\nimport os\n\nHOST_TOOLS = ("build",)\n')
    with pytest.raises(ValueError, match="does not declare OWN_LOGGING before its first def"):
        host.groups_for(["fake-verb"], commands, cli)
    write_verb(commands, cli, 'OWN_LOGGING = False\n\ndef f():\n    pass\n\nHOST_TOOLS = ()\n')
    with pytest.raises(ValueError, match="does not declare HOST_TOOLS"):
        host.groups_for(["fake-verb"], commands, cli)
    write_verb(commands, cli, 'OWN_LOGGING = False\nHOST_TOOLS = ("base", "gpu")\n')
    with pytest.raises(ValueError, match="no host tool group 'base', 'gpu'"):
        host.groups_for(["fake-verb"], commands, cli)
    write_verb(commands, cli, 'OWN_LOGGING = 1\nHOST_TOOLS = ()\n')
    with pytest.raises(ValueError, match="OWN_LOGGING must be True or False"):
        host.groups_for(["fake-verb"], commands, cli)
    write_verb(commands, cli, 'OWN_LOGGING = False\nHOST_TOOLS = tuple(["build"])\n')
    with pytest.raises(ValueError, match="fake_verb.py:2: HOST_TOOLS is not a literal"):
        host.groups_for(["fake-verb"], commands, cli)
    write_verb(commands, cli, 'OWN_LOGGING: bool = True\nHOST_TOOLS: tuple[str, ...] = ()\n'
               'HOST_TOOLS_WITH: dict[str, tuple[str, ...]] = {"--gdb": ("selftest",)}\n'
               'X = """\ndef in a string\n"""\n\ndef f() -> None:\n    pass\n')
    assert host.groups_for(["fake-verb", "--gdb"], commands, cli) == ("base", "selftest")
    needs = host.verb_needs("fake-verb", commands)
    assert needs.own_logging is True and needs.host_tools == ()


def test_host_imports_only_the_standard_library() -> None:
    """./lab runs harness.host with the system python3, which has none of our dependencies."""
    ours = {"harness", "harness.arch", "harness.errors"}
    for module in ("__init__", "arch", "errors", "host"):
        tree = ast.parse((REPO / "harness" / f"{module}.py").read_text())
        for node in tree.body:  # module level: a function may import what it runs
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name in ours or name.split(".")[0] in sys.stdlib_module_names \
                    or name == "__future__", f"harness/{module}.py imports {name}"


def isolated_packages(*args: str) -> subprocess.CompletedProcess:
    """`python3 -m harness.host packages ...` as ./lab runs it: no site-packages (-S), no
    environment, and on sys.path only the stdlib and the checkout."""
    code = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
            "runpy.run_module('harness.host', run_name='__main__', alter_sys=True)")
    return subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO), *args],
                          capture_output=True, text=True, timeout=60, cwd="/")


@pytest.mark.parametrize("argv", [["--help"], ["run", "--selftests"], ["selftest"],
                                  ["--lab-config", "x", "gc"], ["bench", "boot"]])
def test_packages_runs_with_the_system_python(argv: list[str]) -> None:
    p = isolated_packages("packages", "--", *argv)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    want = host.missing_packages(host.groups_for(argv))
    assert p.stdout.splitlines() == want


def test_packages_prints_what_is_missing_one_a_line(tmp_path: Path) -> None:
    code = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); import harness.host as h; "
            "h._path = lambda: ''; h.os.path.exists = lambda p: False; "
            "sys.exit(h.main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO), "packages", "--",
                        "selftest"], capture_output=True, text=True, timeout=60, cwd="/")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines == sorted(set(lines))
    assert {"chromium", "gdb", "make", "libelf-dev", "zstd", "qemu-utils",
            "debian-archive-keyring"} <= set(lines)


def test_packages_usage() -> None:
    assert isolated_packages("packages", "run").returncode == 2
    assert "usage:" in isolated_packages("nonsense").stderr
    assert isolated_packages("packages", "--venv", "--").returncode == 0
