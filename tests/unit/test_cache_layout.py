"""harness/cache.py's Layout: every path under the cache root is one of its methods, each stays
under the root, and the module docstring's layout names every top-level entry they build."""
from __future__ import annotations

import inspect
from pathlib import Path

from harness import cache

ROOT = Path("/c")


def built() -> dict[str, Path]:
    """Each Layout method's path, called with placeholder arguments."""
    layout = cache.Layout(ROOT)
    out = {}
    for name, method in inspect.getmembers(layout, inspect.ismethod):
        if name.startswith("_"):
            continue
        args = ["x"] * (len(inspect.signature(method).parameters))
        out[name] = method(*args)
    return out


def test_every_path_is_under_the_root() -> None:
    for name, path in built().items():
        assert path.is_relative_to(ROOT) and path != ROOT, name


def test_the_docstring_layout_names_every_top_level_entry() -> None:
    doc = cache.__doc__ or ""
    for name, path in built().items():
        top = path.relative_to(ROOT).parts[0]
        if name == "folder":
            continue  # the kind asked for: each kind of KINDS is checked below
        assert f"{top}/" in doc or f"  {top} " in doc, f"{name}: {top} is not in the layout"
    for kind in cache.KINDS:
        assert f"{kind}/" in doc


def test_the_gc_kinds_are_where_the_layout_puts_them() -> None:
    layout = cache.Layout(ROOT)
    assert layout.build("d").parent == layout.folder("builds")
    assert layout.buildroot("d").parent == layout.folder("buildroots")
    assert layout.tree("p", "v").parent == layout.folder("trees") == layout.trees()
    assert layout.kernel("k").parent == layout.folder("kernels")
    for kind, method in (("bisect", layout.bisect), ("mutate", layout.mutate),
                         ("nightly", layout.nightly)):
        assert method("d") == layout.folder(kind) / "d"
    assert cache.entry_of(ROOT, layout.mutate("d") / "src") == ("mutate", "d")
