"""By hand: build race mutants of src-7.2-race in the mutate workspace, keep a copy of each
prepared kernel (image + modules) under /tmp/mk/<id>, revert. From the checkout, with its
virtualenv: .venv/bin/python docs/results/2026-12-05-races-round3/build_mutants.py 063,064"""
import shutil, sys
from pathlib import Path
REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from harness import cache, config as lab_config
from harness.kernels import mutants as catalogs
from harness.mutate import build
from harness.mutate.plan import Plan
from harness.mutate.workspace import Workspace
from harness.resources import Lab
cfg = lab_config.load(REPO / "lab.yaml")
spec = cfg.kernel("src-7.2-race")
cfg = cfg.with_kernel(spec) if hasattr(cfg, "with_kernel") else cfg
ms = catalogs.select(catalogs.catalog(), sys.argv[1])
plan = Plan(cfg, spec, tuple(ms), None, (), Path("/tmp/mk/report"))
tree = Lab(cfg).builder().tree(spec, spec.source)
ws = Workspace(tree, cache.cache_root(cfg.cache_dir))
with ws.opened():
    ms = catalogs.for_tree_all(list(ms), ws.src, ws.tree)
    k, report = build.build(plan, ws.src)
    outs = build.outs(k, report)
    for m in ms:
        with ws.applied(m, outs):
            mk, _ = build.build(plan, ws.src)
            dst = Path("/tmp/mk") / m.id
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(mk.vmlinuz.parent, dst, symlinks=True)
            print(m.id, "->", dst, mk.vmlinuz.name, flush=True)
            build.forget(mk.vmlinuz.parent)
    build.build(plan, ws.src)
