"""The lab's initramfs: static busybox plus the few modules needed to reach the root disk.

Debian's kernels build virtio_blk and virtio_net as modules, so the kernel cannot mount the
guest's root disk on its own. This initramfs loads them (dependencies first), mounts /dev/vda
and switches to /sbin/ringlab-init. It is tiny (~1.3 MB), so it costs nothing at boot.
"""
from __future__ import annotations

import gzip
import hashlib
import lzma
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from harness import paths
from harness.errors import HostError, KernelError

# What the guest needs before its root filesystem is mounted. ext4 too: Debian's rt and
# arm64 flavours build it as a module (cloud-amd64 has it built in), and 6.12's ext4 asks the
# crypto API for crc32c at mount, which no modprobe can load this early: crc32c_generic first.
BOOT_MODULES = ("virtio_blk", "virtio_net", "crc32c_generic", "ext4")
# The recipe before ext4 was added: for a kernel with ext4 built in, its initramfs mounts the
# root as the current one does, so it is not stale (see is_current()).
_BEFORE_EXT4 = ("virtio_blk", "virtio_net")
INIT_SCRIPT = paths.ROOTFS / "initramfs-init"
PT_INTERP = 3


def recipe_hash(modules: tuple[str, ...] = BOOT_MODULES) -> str:
    """What an initramfs is built from (the init script, the boot modules): a prepared kernel
    whose initramfs came from another recipe is stale."""
    h = hashlib.sha256(INIT_SCRIPT.read_bytes())
    h.update(" ".join(modules).encode())
    return h.hexdigest()[:16]


def is_current(recipe: str | None, ext4_builtin: bool) -> bool:
    """True if an initramfs made by `recipe` boots its kernel as this recipe's would: the same
    recipe, or the one before ext4 joined for a kernel with ext4 built in (so adding ext4 did
    not re-prepare every kernel in the cache, under the feet of runs using them)."""
    return recipe == recipe_hash() or (ext4_builtin and recipe == recipe_hash(_BEFORE_EXT4))


def is_static_elf(path: Path) -> bool:
    """True if `path` is an ELF64 executable with no program interpreter (statically linked)."""
    with path.open("rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != PT_INTERP
               for i in range(phnum))


def find_busybox() -> Path:
    for candidate in ("/bin/busybox", "/usr/bin/busybox"):
        p = Path(candidate)
        if p.exists() and is_static_elf(p):
            return p
    raise HostError("no statically linked busybox found (it runs before the guest has a libc)",
                    hint="apt-get install busybox-static")


def module_order(modules_dep: str, wanted: tuple[str, ...]) -> list[str]:
    """Module files (relative paths from modules.dep) for `wanted`, dependencies first.

    Names missing from modules.dep are assumed built in and skipped.
    """
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in modules_dep.splitlines():
        if ":" not in line:
            continue
        mod, rest = line.split(":", 1)
        deps[mod] = rest.split()
        name = Path(mod).name.split(".ko")[0].replace("-", "_")
        by_name[name] = mod
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod in order:
            return
        # modules.dep lists every (transitive) dependency; load them deepest first.
        for dep in reversed(deps.get(mod, [])):
            visit(dep)
        order.append(mod)

    for name in wanted:
        if name in by_name:
            visit(by_name[name])
    return order


def _decompressed(path: Path) -> bytes:
    """A module's bytes, decompressed: busybox insmod takes plain .ko files only."""
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        return gzip.decompress(data)
    if path.name.endswith(".ko.zst"):
        return subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
    return data


def build(modules_dir: Path | None, out: Path, busybox: Path | None = None) -> None:
    """Write the initramfs (gzip'd newc cpio) to `out`.

    `modules_dir` is lib/modules/<release> with a modules.dep, or None for a kernel that has
    its boot drivers built in. `busybox` is a static busybox of the kernel's arch (default:
    the host's, for a kernel of the host's arch).
    """
    if busybox is None:
        busybox = find_busybox()
    elif not is_static_elf(busybox):
        raise KernelError(f"{busybox}: not a statically linked ELF64 busybox")
    if shutil.which("cpio") is None:
        raise HostError("cpio is missing", hint="apt-get install cpio")
    with tempfile.TemporaryDirectory(prefix="ringlab-initramfs-") as tmp:
        root = Path(tmp)
        for d in ("bin", "dev", "proc", "sys", "newroot", "modules"):
            (root / d).mkdir()
        shutil.copy2(busybox, root / "bin" / "busybox")
        shutil.copy2(INIT_SCRIPT, root / "init")
        (root / "init").chmod(0o755)
        names = []
        if modules_dir is not None:
            dep = modules_dir / "modules.dep"
            if not dep.exists():
                raise KernelError(f"{modules_dir}: no modules.dep (depmod was not run)")
            for rel in module_order(dep.read_text(), BOOT_MODULES):
                name = Path(rel).name.split(".ko")[0] + ".ko"
                (root / "modules" / name).write_bytes(_decompressed(modules_dir / rel))
                names.append(name)
        (root / "modules" / "load-order").write_text("".join(n + "\n" for n in names))
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        cpio = subprocess.run(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"],
                              input="\n".join(["."] + files).encode(), cwd=root,
                              capture_output=True, check=True).stdout
    out.write_bytes(gzip.compress(cpio, compresslevel=6))
