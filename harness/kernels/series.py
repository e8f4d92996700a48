"""Patch series: read one (a folder of *.patch, a quilt `series` file, or an mbox as `b4 am`
writes it) and apply it to a throw-away copy of a kernel tree.

A patch that does not apply is reported by name with the hunk that was rejected, which is what
a reviewer needs to rebase it; a patch that is already in the tree is told apart.
"""
from __future__ import annotations

import email.header
import email.message
import hashlib
import logging
import mailbox
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.errors import PatchError

log = logging.getLogger(__name__)

_HUNK = re.compile(r"^@@ -(?P<start>\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")
_FILE = re.compile(r"^diff --git a/(?P<a>\S+) b/(?P<b>\S+)")
_FAILED = re.compile(r"error: patch failed: (?P<file>\S+):(?P<line>\d+)")
_COVER = re.compile(r"\[.*\b0+/\d+\]")


@dataclass(frozen=True)
class Patch:
    name: str      # file name, or "NNNN <subject>" for a message of an mbox
    text: str
    origin: Path   # the file it came from

    @property
    def subject(self) -> str:
        m = re.search(r"^Subject: (.*(?:\n[ \t].*)*)", self.text, re.M)
        return " ".join(m.group(1).split()) if m else self.name

    def hunk(self, path: str, old_start: int) -> str | None:
        """The text of the hunk of `path` that starts at line `old_start` of the old file."""
        current, hunk = None, None
        out: list[str] = []
        for line in self.text.splitlines():
            if (m := _FILE.match(line)):
                current = m.group("a")
                if hunk:
                    break
                continue
            m = _HUNK.match(line)
            if m:
                if hunk:
                    break
                hunk = current == path and int(m.group("start")) == old_start
            elif hunk and line.startswith("-- ") and line.strip() == "--":
                break
            if hunk:
                out.append(line)
        return "\n".join(out) or None


def read(source: Path) -> list[Patch]:
    """The patches of a series, in order. `source` is a folder (its `series` file if any,
    else its *.patch / *.diff files sorted by name), a quilt series file, an mbox, or one
    patch file."""
    if source.is_dir():
        if (source / "series").is_file():
            return _quilt(source / "series")
        files = sorted(p for p in source.iterdir() if p.suffix in (".patch", ".diff"))
        if not files:
            raise PatchError(f"{source}: no *.patch or *.diff files and no series file")
        return [_one(p) for p in files]
    if source.name == "series":
        return _quilt(source)
    if source.suffix not in (".patch", ".diff") and source.read_bytes()[:5] == b"From ":
        return _mbox(source)  # b4 am writes <msgid>.mbx; any mbox of patch mails will do
    return [_one(source)]


def _one(path: Path) -> Patch:
    try:
        return Patch(path.name, path.read_text(errors="replace"), path)
    except OSError as e:
        raise PatchError(f"{path}: cannot read the patch: {e.strerror}") from None


def _quilt(series: Path) -> list[Patch]:
    names = [line.split("#", 1)[0].split()[0] for line in series.read_text().splitlines()
             if line.split("#", 1)[0].strip()]
    if not names:
        raise PatchError(f"{series}: the series file lists no patches")
    missing = [n for n in names if not (series.parent / n).is_file()]
    if missing:
        raise PatchError(f"{series}: lists patches that are not there: {', '.join(missing)}")
    return [_one(series.parent / n) for n in names]


def _decoded(part: email.message.Message) -> bytes:
    """A message part's transfer-decoded payload; b"" when there is none (a multipart)."""
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _mbox(path: Path) -> list[Patch]:
    """The patches of an mbox (`b4 am -o`), in order; a cover letter (0/N) is left out."""
    out: list[Patch] = []
    for i, msg in enumerate(mailbox.mbox(str(path), create=False)):
        subject = str(email.header.make_header(email.header.decode_header(
            msg.get("Subject", ""))))
        if _COVER.search(subject):
            continue
        payload = _decoded(msg) if not msg.is_multipart() else b"".join(
            _decoded(part) for part in msg.walk() if part.get_content_type() == "text/plain")
        body = payload.decode(msg.get_content_charset() or "utf-8", "replace")
        if "\ndiff --git " not in "\n" + body:
            continue
        out.append(Patch(f"{len(out) + 1:04d} {subject}",
                         f"Subject: {subject}\n\n{body}", path))
    if not out:
        raise PatchError(f"{path}: the mbox holds no patch (no message with a diff)")
    return out


def fingerprint(sources: tuple[Path, ...]) -> str:
    """A hash of the series' content (what a build cache is keyed by)."""
    h = hashlib.sha256()
    for source in sources:
        for patch in read(source):
            h.update(patch.name.encode() + b"\0" + patch.text.encode() + b"\0")
    return h.hexdigest()[:16]


def apply(sources: tuple[Path, ...], tree: Path) -> list[Patch]:
    """Apply every patch of `sources` to `tree` (a throw-away copy) in order. Raises a
    PatchError naming the patch and showing the rejected hunk."""
    applied = []
    for source in sources:
        for patch in read(source):
            _apply_one(patch, tree)
            applied.append(patch)
    log.debug("applied %d patch(es) to %s", len(applied), tree)
    return applied


def _git_apply(patch: Patch, tree: Path, *flags: str) -> subprocess.CompletedProcess:
    # git apply works in a plain directory too, and skips a mail's text before the diff.
    return subprocess.run(["git", "apply", "--whitespace=nowarn", *flags, "-"],
                          input=patch.text, cwd=tree, capture_output=True, text=True)


def _apply_one(patch: Patch, tree: Path) -> None:
    p = _git_apply(patch, tree)
    if p.returncode == 0:
        return
    if _git_apply(patch, tree, "--reverse", "--check").returncode == 0:
        raise PatchError(f"patch {patch.name} ({patch.origin}) does not apply: it is already "
                         f"in the tree", hint="drop it from the series, or use an older tree")
    m = _FAILED.search(p.stderr)
    detail = p.stderr.strip().splitlines()[:3]
    hunk = patch.hunk(m.group("file"), int(m.group("line"))) if m else None
    where = f" at {m.group('file')}:{m.group('line')}" if m else ""
    raise PatchError(f"patch {patch.name} ({patch.origin}) does not apply{where}: "
                     + "; ".join(detail)
                     + (f"\nrejected hunk:\n{hunk}" if hunk else ""),
                     hint="rebase the series on this tree")
