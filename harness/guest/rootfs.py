"""The guest root filesystem: a Debian image built with mmdebstrap, cached by its recipe's hash.

The image is never written by a guest: every boot gets a throw-away qcow2 overlay (vm.py),
and the digests recorded when it was built (harness/cache.py) tell a changed image, which is
built again, from the one that was built.
The SSH host key is made when the image is built and stored beside it, so the harness pins
it instead of trusting whatever answers on the forwarded port.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path

from harness import arch as arches, cache, host, paths, progress
from harness.config import RootfsSpec
from harness.errors import HostError, RootfsError
from harness.debian.mirror import Mirror

log = logging.getLogger(__name__)

FILES = paths.ROOTFS
# Always in the image: what ringlab-init, sshd and the probes need; and bc, which the kernel's
# own ftracetest cases compute with (test.d/remotes/functions: check_trace's timestamps).
REQUIRED_PACKAGES = ("python3", "openssh-server", "kmod", "iproute2", "tini", "procps",
                     "util-linux", "bc")
# Left out of the image: documentation only slows the image build down.
EXCLUDED_PATHS = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*",
                  "/usr/share/locale/*", "/usr/share/lintian/*")
UNPRIVILEGED_USER = "lab"
UNPRIVILEGED_UID = 1000
RECIPE_VERSION = 1
# What the lab uses of an entry, recorded with their digests when it is built (harness/cache.py).
ENTRY_FILES = ("rootfs.ext4", "ssh_host_ed25519_key.pub")
HEADROOM_MB = 512  # free space in the image for what tests write


@dataclass(frozen=True)
class RootfsImage:
    image: Path
    host_key: str  # "ssh-ed25519 AAAA...": the guest's pinned host key
    recipe_hash: str
    suite: str
    arch: str = arches.DEFAULT  # the harness.arch its programs are built for


def recipe(spec: RootfsSpec, client_public_key: str,
           arch: arches.Arch = arches.get(arches.DEFAULT)) -> dict:
    """Everything that determines the image's content; its hash names the cache entry. The
    Debian architecture is in it only for an arch named in keys (Arch.named_in_keys), so the
    images built before arches keep their names (and the snapshots made on them)."""
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(FILES.iterdir()) if p.is_file() and p.name != "initramfs-init"}
    r = {"version": RECIPE_VERSION, "suite": spec.suite, "variant": spec.variant,
         "packages": sorted(set(REQUIRED_PACKAGES) | set(spec.packages)),
         "files": files, "authorized_key": client_public_key,
         "user": [UNPRIVILEGED_USER, UNPRIVILEGED_UID]}
    if arch.named_in_keys:
        r["architecture"] = arch.debian
    return r


def recipe_hash(r: dict) -> str:
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]


def _load(entry: Path, digest: str, suite: str, arch: str) -> RootfsImage | None:
    """The image in `entry`; None if there is none or a file of it changed since it was
    built (then it is removed, and built again)."""
    image, key = entry / "rootfs.ext4", entry / "ssh_host_ed25519_key.pub"
    if image.exists() and key.exists() and cache.intact(entry, ENTRY_FILES):
        return RootfsImage(image=image, host_key=" ".join(key.read_text().split()[:2]),
                           recipe_hash=digest, suite=suite, arch=arch)
    return None


def _mmdebstrap(r: dict, target: Path, mirror: Mirror, log_path: Path) -> None:
    if shutil.which("mmdebstrap") is None:
        raise HostError("mmdebstrap is missing", hint="apt-get install mmdebstrap")
    if os.geteuid() != 0:
        raise RootfsError("building the rootfs needs root (mmdebstrap into a directory, then "
                          "mkfs.ext4 -d keeps file ownership only as root)",
                          hint="run ./lab once as root; later runs reuse the cached image")
    user, uid = r["user"]
    # A foreign arch's second stage (maintainer scripts, useradd) runs through qemu-user.
    foreign = [f"--architectures={r['architecture']}"] if "architecture" in r else []
    cmd = ["mmdebstrap", f"--variant={r['variant']}", *foreign,
           f"--include={','.join(r['packages'])}",
           f"--keyring={mirror.keyring}",
           *[f"--dpkgopt=path-exclude={p}" for p in EXCLUDED_PATHS],
           f"--customize-hook=chroot \"$1\" useradd -m -u {uid} -U -s /bin/sh {user}",
           r["suite"], str(target), mirror.url]
    log.debug("run: %s", " ".join(cmd))
    with log_path.open("w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log_path.read_text().strip().splitlines()[-5:]
        raise RootfsError(f"mmdebstrap failed (exit {proc.returncode}); last lines:\n    "
                          + "\n    ".join(tail), hint=f"full log: {log_path}")


def _install_files(root: Path, client_public_key: str) -> None:
    shutil.copy2(FILES / "ringlab-init", root / "sbin" / "ringlab-init")
    (root / "sbin" / "ringlab-init").chmod(0o755)
    shutil.copy2(FILES / "sshd_config", root / "etc/ssh/sshd_config.d/ringlab.conf")
    (root / "etc/hostname").write_text("ringlab\n")
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n127.0.1.1 ringlab\n")
    (root / "usr/lib/modules").mkdir(parents=True, exist_ok=True)
    for home, uid in (("root", 0), (f"home/{UNPRIVILEGED_USER}", UNPRIVILEGED_UID)):
        ssh_dir = root / home / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(client_public_key + "\n")
        for p in (ssh_dir, ssh_dir / "authorized_keys"):
            os.chown(p, uid, uid)
        (ssh_dir / "authorized_keys").chmod(0o600)


def _make_image(root: Path, image: Path) -> None:
    used = int(subprocess.run(["du", "-sm", str(root)], capture_output=True, text=True,
                              check=True).stdout.split()[0])
    proc = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "ringlab-root", "-d", str(root),
                           str(image), f"{used + HEADROOM_MB}M"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RootfsError(f"mkfs.ext4 failed: {proc.stderr.strip()}")


def ensure(spec: RootfsSpec, mirror_for: Callable[[], Mirror], cache_root: Path,
           client_public_key: str, arch: arches.Arch = arches.get(arches.DEFAULT)) -> RootfsImage:
    """The cached image for `spec` and `arch`, building it first if needed.

    `mirror_for` is called only when a build is needed, so a warm cache never touches the
    network or the host's apt configuration.
    """
    r = recipe(spec, client_public_key, arch)
    digest = recipe_hash(r)
    entry = cache.Layout(cache_root).rootfs(digest)
    if (img := _load(entry, digest, spec.suite, arch.name)):
        return img
    mirror = mirror_for()
    if not arches.is_native(arch) and os.geteuid() == 0:
        log.info("%s", host.ensure_binfmt(arch))
    with progress.step(f"building the {spec.suite} {arch.debian} rootfs ({digest})") as status, \
            cache.building(entry) as scratch:
        tree = scratch / "tree"
        status("mmdebstrap")
        # The log lives outside the scratch directory so it survives a failed build.
        _mmdebstrap(r, tree, mirror, entry.parent / f"{digest}.mmdebstrap.log")
        status("configuring")
        _install_files(tree, client_public_key)
        shutil.copy2(tree / "etc/ssh/ssh_host_ed25519_key.pub",
                     scratch / "ssh_host_ed25519_key.pub")
        status("making the ext4 image")
        _make_image(tree, scratch / "rootfs.ext4")
        shutil.rmtree(tree)
        (scratch / "recipe.json").write_text(json.dumps(r, indent=2))
        status("recording its digests")
        cache.record(scratch, ENTRY_FILES)
    img = _load(entry, digest, spec.suite, arch.name)
    assert img is not None
    return img


def recheck(img: RootfsImage) -> bool:
    """After a failed boot: whether the image's cache entry changed in a way its files' sizes
    and mtimes hide (every SHA256 computed: about a second for the image). A changed entry is
    removed, to be built again: the failure was the cache's, not the kernel's."""
    return not cache.intact(img.image.parent, ENTRY_FILES, deep=True)
