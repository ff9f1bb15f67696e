"""Stress one sm90 cupy kernel with M x N aux inputs for intermittent wrong results: the same
call many times against one reference, per variant (aux in the ring / in a buffer, tiles). Prints bad calls per variant. GPU only."""
import sys

import evt_core
from evt_backends.cupy.codegen.plan import TileConfig
from tests.gpu.test_cupy import check, make

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
VARIANTS = [("ring auto", {}),
            ("ring pp64x256 s3", {"tile": TileConfig(64, 256, 64, stages=3, pingpong=True)}),
            ("ring pp128x128", {"tile": TileConfig(128, 128, 64, stages=6, pingpong=True)}),
            ("buffer pp64x256", {"aux_ring": False, "tile": TileConfig(64, 256, 64, stages=4, pingpong=True)}),
            ("ring coop128", {"tile": TileConfig(128, 128, 64, stages=6)})]

for name, shape in [("paper", (1, 4100, 2056, 136)), ("w2", (1, 4100, 2056, 136)), ("paper", (1, 4100, 2056, 1032))]:
    L, M, N, K = shape
    tree, A, B, inputs = make(name, L, M, N, K, "float16", batched=False)
    ref = evt_core.interpret(tree, A, B, **inputs)
    for label, opts in VARIANTS:
        try:
            kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False, fast_math=False,
                                    **opts)
            bad, first = 0, ""
            for _ in range(REPS):
                got = kern(A, B, **inputs)
                try:
                    check(got, ref, K)
                except AssertionError as e:
                    bad += 1
                    first = first or str(e).split("\n")[3:6]
            last = kern.run.last
            print(f"{name} {shape} {label}: tile {last.cfg.label()} ring {last.spec.aux_ring} aux {last.spec.aux_tma}:"
                  f" {bad}/{REPS} bad calls, watchdog {kern.run.watchdog_fired()} {first}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{name} {shape} {label}: {type(e).__name__}: {str(e)[:200]}", flush=True)
