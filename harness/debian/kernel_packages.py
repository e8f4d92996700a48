"""Which packages make up a Debian kernel: the metapackage's dependency closure, as apt sees it.

Up to 6.12 a flavour's metapackage `linux-image-<flavour>` depended on one versioned package,
`linux-image-<release>`, that held boot/vmlinuz and lib/modules. From 7.x Debian splits a
kernel: the metapackages depend on `linux-base-<flavour>`, `linux-image-<release>` (itself a
metapackage) and `linux-modules-<flavour>`; the image is in `linux-binary-<release>` (source
linux-signed-*), the modules in `linux-modules-<release>`, and the image, config and System.map
sit in /usr/lib/modules/<release>/. Rather than knowing either layout, the lab walks the
Depends and Pre-Depends (python-debian's relation parser) among the archive's kernel packages,
choosing in each `a | b` group the first alternative that is a kernel package of the index
whose version satisfies the relation, as apt would; everything else (kmod, dracut, apparmor,
the linux-base tool package) is the guest's business, not the kernel's.
"""
from __future__ import annotations

import re
from functools import cmp_to_key
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from debian.debian_support import version_compare
from debian.deb822 import PkgRelation

from harness.debian.archive import PackageRecord
from harness.errors import KernelError

# The packages a kernel is made of; `linux-base` alone (no dash after it) is a tool package.
KERNEL_PACKAGE = re.compile(r"^linux-(image|binary|modules|base|headers|kbuild)-")
# A release as Debian names it: 6.12.38+deb13, 6.1.0-37, 7.3.4+deb13, 7.2.13+deb14.
_RELEASE = r"\d+\.\d+[\d.]*(?:-\d+)?(?:\+[a-z0-9.]+)?"
_OPS = {"<<": lambda c: c < 0, "<=": lambda c: c <= 0, "=": lambda c: c == 0,
        ">=": lambda c: c >= 0, ">>": lambda c: c > 0}


@dataclass(frozen=True)
class KernelPackages:
    """A resolved Debian kernel: the package asked for, the versioned image package (whose
    version names the kernel and its headers) and every kernel package to unpack."""
    root: PackageRecord
    image: PackageRecord
    closure: tuple[PackageRecord, ...]


def index(records: Iterable[PackageRecord]) -> dict[str, list[PackageRecord]]:
    """Records by package name, newest version first (a suite may carry several)."""
    by_name: dict[str, list[PackageRecord]] = {}
    for r in records:
        by_name.setdefault(r.name, []).append(r)
    for versions in by_name.values():
        versions.sort(key=lambda r: _VERSION(r.version), reverse=True)
    return by_name


_VERSION = cmp_to_key(version_compare)


def satisfies(version: str, relation: tuple[str, str] | None) -> bool:
    """Whether `version` meets a relation's (operator, version), as dpkg compares."""
    if relation is None:
        return True
    op, wanted = relation
    return _OPS[op](version_compare(version, wanted))


def image_package_name(flavour: str, names: Iterable[str]) -> list[str]:
    """The versioned image packages of `flavour` among `names` (linux-image-<release>-<flavour>,
    not -dbg or -unsigned, not another flavour ending in the same word)."""
    pattern = re.compile(rf"^linux-image-{_RELEASE}-{re.escape(flavour)}$")
    return [n for n in names if pattern.match(n)]


def resolve(packages: Mapping[str, list[PackageRecord]], flavour: str,
            version: str | None = None, where: str = "the suite") -> KernelPackages:
    """The kernel of `flavour`: its metapackage's closure, or with `version` (a Debian version
    such as 7.2.12-1~bpo13+1, or the upstream 7.2.12) the versioned image package's."""
    if version is None:
        meta = f"linux-image-{flavour}"
        if meta not in packages:
            raise KernelError(f"no package {meta} in {where} (flavours there: "
                              f"{flavours(packages)})")
        root = packages[meta][0]
    else:
        candidates = [r for n in image_package_name(flavour, packages) for r in packages[n]
                      if r.version == version or r.version.split("-")[0] == version]
        if not candidates:
            have = sorted({r.version for n in image_package_name(flavour, packages)
                           for r in packages[n]}, key=_VERSION, reverse=True)
            raise KernelError(f"no linux-image-*-{flavour} at version {version} in {where} "
                              f"(versions there: {', '.join(have[:12]) or 'none'})")
        root = max(candidates, key=lambda r: _VERSION(r.version))
    closure = dependency_closure(packages, root)
    images = [r for r in closure if image_package_name(flavour, [r.name])]
    if not images:
        raise KernelError(f"{root.name} {root.version} in {where} depends on no versioned "
                          f"linux-image-<release>-{flavour} package")
    return KernelPackages(root=root, image=images[0], closure=tuple(closure))


def dependency_closure(packages: Mapping[str, list[PackageRecord]],
                       root: PackageRecord) -> list[PackageRecord]:
    """`root` and the kernel packages it needs, transitively, in the order first reached."""
    seen: dict[str, PackageRecord] = {root.name: root}
    todo = [root]
    while todo:
        rec = todo.pop(0)
        for group in PkgRelation.parse_relations(", ".join(filter(None, (rec.pre_depends,
                                                                          rec.depends)))):
            chosen = _choose(packages, group)
            if chosen is None:
                if any(KERNEL_PACKAGE.match(alt["name"]) for alt in group):
                    wanted = " | ".join(_relation_text(alt) for alt in group)
                    raise KernelError(f"{rec.name} {rec.version} depends on {wanted}, which is "
                                      "not in the suite's index")
                continue  # not a kernel package: the guest's rootfs provides what it needs
            if chosen.name not in seen:
                seen[chosen.name] = chosen
                todo.append(chosen)
    return list(seen.values())


def _choose(packages: Mapping[str, list[PackageRecord]],
            group: list[PkgRelation.ParsedRelation]) -> PackageRecord | None:
    for alt in group:
        if not KERNEL_PACKAGE.match(alt["name"]):
            continue
        for r in packages.get(alt["name"], []):
            if satisfies(r.version, alt.get("version")):
                return r
    return None


def _relation_text(alt: PkgRelation.ParsedRelation) -> str:
    v = alt.get("version")
    return f"{alt['name']} ({v[0]} {v[1]})" if v else alt["name"]


def flavours(packages: Mapping[str, list[PackageRecord]]) -> str:
    """The flavours of an index, for an error message: linux-image-<flavour> metapackages."""
    names = sorted(n.removeprefix("linux-image-") for n in packages
                   if n.startswith("linux-image-") and not re.match(r"linux-image-\d", n)
                   and not n.endswith(("-dbg", "-unsigned")))
    return ", ".join(names[:20]) or "none"
