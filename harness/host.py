"""What the host must have: the one table of commands (and files) the lab runs, the Debian
packages that provide them and why, in groups a verb asks for; and one-line errors that say how
to install what is missing.

`./lab` reads this table before the virtualenv exists (`python3 -m harness.host packages -- ARGV`
prints the packages a command line still needs), so this module, harness/arch.py and
harness/errors.py import nothing outside the standard library; a verb's needs are read from
its module's constants (HOST_TOOLS, HOST_TOOLS_WITH) without importing it. The checks below
(require) catch the rest: RINGLAB_NO_INSTALL=1, a changed PATH, a tool removed since."""
from __future__ import annotations

import ast
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness import arch as arches
from harness.errors import HostError


@dataclass(frozen=True)
class Tool:
    command: str
    package: str
    why: str
    # ./lab installs an optional tool, but nothing fails without it (require() skips it).
    optional: bool = False


@dataclass(frozen=True)
class File:
    """A file a package provides that is not a command: development headers, a keyring."""
    path: str
    package: str
    why: str


@dataclass(frozen=True)
class Group:
    """Tools (and files) needed together: `base` by every verb, the others by the verbs that
    name them in HOST_TOOLS."""
    name: str
    why: str
    tools: tuple[Tool, ...]
    files: tuple[File, ...] = ()


OVERLAY_TOOL = Tool("qemu-img", "qemu-utils", "makes each boot's throw-away overlay")


def boot_tools(a: arches.Arch) -> tuple[Tool, ...]:
    """What booting a guest of `a` needs: its qemu-system (from its Arch record) and qemu-img."""
    return (Tool(a.qemu, a.qemu_package, f"runs the {a.name} guests"), OVERLAY_TOOL)


def rootfs_emulator(a: arches.Arch) -> Tool:
    """The qemu-user through which mmdebstrap runs `a`'s maintainer scripts on a host of another
    arch (registered with binfmt_misc: ensure_binfmt())."""
    return Tool(a.qemu_user, a.qemu_user_package,
                f"runs {a.name} programs while the {a.name} rootfs is built")


def foreign_rootfs_tools(a: arches.Arch) -> tuple[Tool, ...]:
    """What building a rootfs of `a` needs beyond ROOTFS_TOOLS: qemu-user when `a` is not
    the host's arch."""
    return () if arches.is_native(a) else (rootfs_emulator(a),)


def cross_build_tools(a: arches.Arch) -> tuple[Tool, ...]:
    """What building a kernel of `a` needs beyond BUILD_TOOLS: Debian's cross toolchain when
    `a` is not the host's arch (gcc-aarch64-linux-gnu brings its binutils). Debian's package
    names have no underscore: x86_64-linux-gnu's is gcc-x86-64-linux-gnu."""
    if arches.is_native(a):
        return ()
    triplet = a.cross_compile.removesuffix("-").replace("_", "-")
    return (Tool(arches.compiler(a), f"gcc-{triplet}", f"cross-compiles {a.name} kernels and "
                 "test modules"),)


BOOT_TOOLS = boot_tools(arches.get(arches.DEFAULT))
KERNEL_TOOLS = (
    Tool("dpkg-deb", "dpkg", "unpacks Debian kernel packages"),
    Tool("depmod", "kmod", "indexes the kernel's modules"),
    Tool("mkfs.ext4", "e2fsprogs", "makes the modules image"),
    Tool("cpio", "cpio", "packs the initramfs"),
    Tool("busybox", "busybox-static", "runs the initramfs"),
    Tool("gpgv", "gpgv", "verifies the mirror's signed Release"),
    Tool("zstd", "zstd", "decompresses a kernel's .ko.zst modules for the initramfs"),
)
ROOTFS_TOOLS = (
    Tool("mmdebstrap", "mmdebstrap", "builds the guest root filesystem"),
    Tool("mkfs.ext4", "e2fsprogs", "makes the root filesystem image"),
)
SSH_TOOL = Tool("ssh", "openssh-client", "./lab ssh opens a shell in a guest")
# The base group, which every verb needs (and ./lab doctor lists): the boot tools of every arch,
# and the qemu-user of every arch but the host's (the others' rootfs are built foreign).
ALL_TOOLS = tuple({t.command: t for t in (
    *(t for a in arches.ARCHES.values() for t in boot_tools(a)), *KERNEL_TOOLS, *ROOTFS_TOOLS,
    *(t for a in arches.ARCHES.values() for t in foreign_rootfs_tools(a)), SSH_TOOL,
)}.values())
KEYRING = File("/usr/share/keyrings/debian-archive-keyring.gpg", "debian-archive-keyring",
               "the keys of Debian's signed Release files (lab.yaml mirror.keyring may name "
               "another)")
BUILD_TOOLS = (
    Tool("make", "make", "builds kernels"),
    Tool("gcc", "gcc", "compiles kernels"),
    Tool("flex", "flex", "generates the Kconfig parser"),
    Tool("bison", "bison", "generates the Kconfig parser"),
    Tool("bc", "bc", "computes kernel constants at build time"),
    Tool("git", "git", "applies patch series and bisects"),
    Tool("pkg-config", "pkgconf", "finds libelf for objtool"),
    Tool("xz", "xz-utils", "tar unpacks a Debian linux-source .tar.xz with it"),
    Tool("ccache", "ccache", "makes rebuilds fast (kbuild uses it when present)", optional=True),
    Tool("patch", "patch", "for hand fixes to a kernel tree (the lab applies series with git "
         "apply)", optional=True),
)
# Headers a kernel build needs (objtool links libelf; certificate tools link OpenSSL).
BUILD_HEADERS = (
    File("/usr/include/gelf.h", "libelf-dev", "objtool links libelf"),
    File("/usr/include/openssl/ssl.h", "libssl-dev", "the kernel's certificate tools link "
         "OpenSSL"),
)
SELFTEST_TOOLS = (
    Tool("chromium", "chromium", "the project's end-to-end tests read report.html in a "
         "headless browser"),
    Tool("gdb", "gdb", "the project's end-to-end tests attach to a guest's gdbstub "
         "(./lab boot --gdb)"),
)
BASE = "base"
# The groups a verb may name in HOST_TOOLS (BASE is every verb's, so never named).
EXTRA_GROUPS = ("build", "selftest")


def group(name: str) -> Group:
    """The group called `name` (BASE or one of EXTRA_GROUPS); what depends on the host's arch
    (qemu-user, the cross compilers) is computed from harness/arch.py's records."""
    if name == BASE:
        return Group(BASE, "every verb: fetch and boot kernels, build root filesystems, reach "
                     "guests", ALL_TOOLS, (KEYRING,))
    if name == "build":
        cross = tuple(t for a in arches.ARCHES.values() for t in cross_build_tools(a))
        return Group("build", "kernel builds: build, review, bisect, mutate, nightly, report, "
                     "run --selftests", BUILD_TOOLS + cross, BUILD_HEADERS)
    if name == "selftest":
        return Group("selftest", "./lab selftest: the project's own tests", SELFTEST_TOOLS)
    raise KeyError(f"no host tool group {name!r}: {BASE} or one of {', '.join(EXTRA_GROUPS)}")


BINFMT_MISC = Path("/proc/sys/fs/binfmt_misc")
# The binfmt_misc registrations qemu-user-static ships (systemd-binfmt's format), per binary.
BINFMT_D = Path("/usr/lib/binfmt.d")


def _path() -> str:
    # depmod and mkfs.ext4 live in sbin, which a non-root PATH may lack.
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def missing(tools: tuple[Tool, ...]) -> list[Tool]:
    """The tools of `tools` not on this host's PATH (optional ones included)."""
    return [t for t in tools if shutil.which(t.command, path=_path()) is None]


def require(tools: tuple[Tool, ...]) -> None:
    """Raise a one-line HostError naming every missing command and the apt-get line for it
    (optional tools are not required)."""
    gone = missing(tuple(t for t in tools if not t.optional))
    if gone:
        names = ", ".join(f"{t.command} ({t.why})" for t in gone)
        packages = " ".join(sorted({t.package for t in gone}))
        raise HostError(f"missing on this host: {names}; install with: apt-get install {packages}")


def missing_files(files: tuple[File, ...]) -> list[File]:
    return [f for f in files if not os.path.exists(f.path)]


def require_headers(headers: tuple[File, ...]) -> None:
    """Raise a HostError naming the -dev packages whose headers are missing."""
    gone = sorted({f.package for f in missing_files(headers)})
    if gone:
        raise HostError(f"missing development headers for kernel builds; install with: "
                        f"apt-get install {' '.join(gone)}")


def binfmt_name(a: arches.Arch) -> str:
    """The binfmt_misc entry qemu-user-static registers for `a` (qemu-aarch64)."""
    return a.qemu_user.removesuffix("-static")


def ensure_binfmt(a: arches.Arch, root: Path = BINFMT_MISC, conf_dir: Path = BINFMT_D) -> str:
    """Make the kernel run `a`'s programs through qemu-user (for mmdebstrap's second stage):
    mount binfmt_misc if it is not (containers often lack it; it mounts here), and register
    qemu-user-static's entry if nothing did (no systemd-binfmt in a container). Returns what
    it did, for the log; HostError saying why when it cannot."""
    name = binfmt_name(a)
    if (root / name).exists():
        return f"binfmt_misc: {name} already registered"
    done = []
    if not (root / "register").exists():
        import subprocess  # here: ./lab's host check starts python3 for every command
        proc = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(root)],
                              capture_output=True, text=True)
        if proc.returncode != 0 or not (root / "register").exists():
            raise HostError(f"cannot mount binfmt_misc at {root} ({proc.stderr.strip()}): "
                            f"building an {a.name} rootfs runs {a.name} programs through "
                            f"{a.qemu_user}",
                            hint=f"as root: mount -t binfmt_misc binfmt_misc {root}")
        done.append(f"mounted binfmt_misc at {root}")
    if not (root / name).exists():
        conf = conf_dir / f"{name}.conf"
        try:
            line = next(ln for ln in conf.read_text().splitlines()
                        if ln.startswith(f":{name}:"))
            (root / "register").write_text(line + "\n")
        except (OSError, StopIteration) as e:
            raise HostError(f"cannot register {name} with binfmt_misc from {conf}: {e}",
                            hint="apt-get install qemu-user-static") from None
        done.append(f"registered {name} from {conf}")
    return "binfmt_misc: " + "; ".join(done)


# What a verb needs is declared at the top of its module, harness/commands/<verb>.py, and read
# here without importing it (the verbs import yaml, rich, ...: not there for the system python):
#   OWN_LOGGING: bool                          the verb opens its own run folder and lab.log
#   HOST_TOOLS: tuple[str, ...]                groups of EXTRA_GROUPS beyond the base
#   HOST_TOOLS_WITH: dict[str, tuple[str, ...]]  (optional) an option's extra groups
COMMANDS = Path(__file__).resolve().parent / "commands"
CLI = Path(__file__).resolve().parent / "cli.py"
DECLARED = ("OWN_LOGGING", "HOST_TOOLS", "HOST_TOOLS_WITH")
# Options of ./lab itself that take a value (to find the verb in argv without parsing it).
LAB_VALUED = ("--lab-config",)


@dataclass(frozen=True)
class VerbNeeds:
    """A verb's declarations, as its module states them."""
    verb: str
    own_logging: bool
    host_tools: tuple[str, ...]
    host_tools_with: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def groups(self, args: list[str]) -> tuple[str, ...]:
        """BASE, the verb's groups, and those of the options in `args` (the words after the
        verb, up to a `--`) and of its sub-command (the first word that is not an option, as
        `./lab bench build`). An option may be given as argparse takes it: `--opt=value`, or
        a prefix of its name."""
        named = [*self.host_tools]
        words = [a for a in args[:args.index("--") if "--" in args else len(args)]]
        if (sub := next((a for a in words if not a.startswith("-")), None)) is not None:
            named += self.host_tools_with.get(sub, ())
        for a in words:
            name = a.split("=", 1)[0]
            if not name.startswith("--"):
                continue
            for option, extra in self.host_tools_with.items():
                if option.startswith("--") and option.startswith(name):
                    named += extra
        return (BASE, *dict.fromkeys(g for g in named if g != BASE))


def module_constants(path: Path, names: tuple[str, ...] = DECLARED) -> dict[str, object]:
    """The literal values of the assignments to `names` at the top of the Python file at `path`
    (before its first def or class: only that much is parsed, a few ms saved on each ./lab),
    without running it; ValueError if one is not a literal."""
    source = path.read_text()
    first_def = re.search(r"^(?:def|async def|class|@)\b", source, re.MULTILINE)
    try:
        tree = ast.parse(source[:first_def.start()] if first_def else source, str(path))
    except SyntaxError:  # the cut fell inside a string: parse it all
        tree = ast.parse(source, str(path))
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in names:
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                raise ValueError(f"{path}:{node.lineno}: {target.id} is not a literal") from None
    return found


def _groups_of(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, tuple) or not all(isinstance(g, str) for g in value):
        raise ValueError(f"{where}: expected a tuple of group names, got {value!r}")
    wrong = [g for g in value if g not in EXTRA_GROUPS]
    if wrong:
        raise ValueError(f"{where}: no host tool group {', '.join(map(repr, wrong))} (the "
                         f"base is every verb's; others: {', '.join(EXTRA_GROUPS)})")
    return value


def verb_needs(verb: str, commands: Path = COMMANDS) -> VerbNeeds:
    """What harness/commands/<verb>.py declares; ValueError naming the file if a declaration
    is missing or wrong."""
    path = commands / f"{verb.replace('-', '_')}.py"
    found = module_constants(path)
    gone = [name for name in DECLARED[:2] if name not in found]
    if gone:
        raise ValueError(f"{path} does not declare {' and '.join(gone)} before its first def "
                         "or class (docs/contributing.md, A verb)")
    own_logging = found["OWN_LOGGING"]
    if not isinstance(own_logging, bool):
        raise ValueError(f"{path}: OWN_LOGGING must be True or False, got {own_logging!r}")
    with_ = found.get("HOST_TOOLS_WITH", {})
    if not isinstance(with_, dict) or not all(isinstance(o, str) and o for o in with_):
        raise ValueError(f"{path}: HOST_TOOLS_WITH must map --options or sub-commands to "
                         f"group names, got {with_!r}")
    return VerbNeeds(verb, own_logging, _groups_of(found["HOST_TOOLS"], f"{path}: HOST_TOOLS"),
                     {o: _groups_of(g, f"{path}: HOST_TOOLS_WITH[{o!r}]")
                      for o, g in with_.items()})


def verb_index(argv: list[str]) -> int | None:
    """Where the verb of a ./lab command line is: its first word that is neither an option nor
    the value of one of LAB_VALUED (None: no word). harness/cli.py's verb_in() checks the word
    names a verb; the rule lives here because ./lab runs it with the system python."""
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
        elif a in LAB_VALUED:
            skip = True
        elif not a.startswith("-"):
            return i
    return None


def verbs(cli: Path = CLI) -> tuple[str, ...]:
    """The verbs, as harness/cli.py's VERBS lists them (read, not imported)."""
    found = module_constants(cli, ("VERBS",)).get("VERBS")
    if not isinstance(found, tuple):
        raise ValueError(f"{cli}: no VERBS tuple")
    return found


def groups_for(argv: list[str], commands: Path = COMMANDS, cli: Path = CLI) -> tuple[str, ...]:
    """The groups a ./lab command line needs: BASE alone unless it names a verb."""
    i = verb_index(argv)
    if i is None or argv[i] not in verbs(cli):
        return (BASE,)  # `./lab --help`, or a mistake the CLI will name
    return verb_needs(argv[i], commands).groups(argv[i + 1:])


def _can_make_venv() -> bool:
    try:
        import ensurepip  # noqa: F401  (Debian ships these apart, in python3-venv)
        import venv  # noqa: F401
    except ImportError:
        return False
    return True


def missing_packages(groups: tuple[str, ...], venv: bool = False) -> list[str]:
    """The Debian packages of `groups` this host lacks (optional tools included: ./lab installs
    them), sorted; with `venv`, python3-venv too if this python cannot make a virtualenv."""
    need = [group(name) for name in groups]
    packages = {t.package for g in need for t in missing(g.tools)}
    packages |= {f.package for g in need for f in missing_files(g.files)}
    if venv and not _can_make_venv():
        packages.add("python3-venv")
    return sorted(packages)


USAGE = "usage: python3 -m harness.host packages [--venv] -- [./lab's arguments]"


def main(argv: list[str]) -> int:
    """`packages [--venv] -- ARGV`: print the Debian packages the command line `./lab ARGV`
    still needs, one a line (./lab installs them). --venv: a virtualenv is to be made, so
    python3-venv too. A verb module whose declarations are missing or wrong is a bug of ours:
    a warning, and the base group only, so ./lab still starts."""
    if argv[:1] != ["packages"]:
        print(USAGE, file=sys.stderr)
        return 2
    rest = argv[1:]
    venv = rest[:1] == ["--venv"]
    rest = rest[1:] if venv else rest
    if rest[:1] != ["--"]:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        groups = groups_for(rest[1:])
    except (OSError, ValueError, SyntaxError) as e:
        print(f"lab: warning: {e}; checking the base host tools only", file=sys.stderr)
        groups = (BASE,)
    for package in missing_packages(groups, venv):
        print(package)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
