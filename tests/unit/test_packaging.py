"""pyproject.toml packages every package of harness/: a fresh `pip install` (CI's, a user's
first `./lab`) must not miss a layer a checkout's own path happened to provide."""
from __future__ import annotations

import tomllib

from harness import paths


def test_every_harness_package_is_packaged() -> None:
    listed = set(tomllib.loads((paths.REPO / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(paths.REPO).parts)
             for p in (paths.REPO / "harness").rglob("__init__.py")}
    assert found - listed == set(), "add these to pyproject.toml [tool.setuptools] packages"
