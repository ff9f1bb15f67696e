"""Every generated cupy source for a matrix of programs x specs x tile configurations, as one
JSON file (name -> text), for checking that a refactor leaves the generated kernels
byte-identical:

    python3 tests/cupy/dump_sources.py before.json        # on the old commit
    python3 tests/cupy/dump_sources.py after.json --compare before.json

Programs: bench.programs' representative ones and W1-W4 (fp16 and bf16, batched and not).
Specs: the canonical row-major call with the fast paths off and on, deterministic, a K-major
B, an M-major A, the (M, N) inputs in a buffer of their own (aux_ring=False), split-K, and the
Spec decide_spec gives under the backend's defaults. Configurations: every tile of the family
(select.tiles) cut to the stages that fit (select.fit_stages), on both mainloops.
"""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench import programs as P  # noqa: E402
from evt_core.errors import UnsupportedError  # noqa: E402
from evt_core.tree.ops import Op  # noqa: E402
from evt_backends.cupy.select import fit_stages, generate, tiles  # noqa: E402
from tests.cupy.helpers import canonical_spec, default_spec  # noqa: E402
from tests.source_dump import main  # noqa: E402


def programs():
    out = {name: mk() for name, mk in P.REPRESENTATIVE.items()}
    for key, mk in P.WORKLOADS.items():
        for dt in ("float16", "bfloat16"):
            for batched in (False, True):
                out[f"{key}/{dt}/batched{batched}"] = mk(dt, batched=batched)
    out["W2-erf"] = P.w2_backward(grad=Op.GELU_GRAD)
    out["paper_batched"] = P.paper_example(batched=True)
    return out


def specs(p, dt):
    """(name, Spec) pairs of the sm90 calls this matrix covers for program p."""
    fast = dict(aux_tma=True, tma_store_all=True, fast_math=True)
    out = [("plain", canonical_spec(p, dt, "sm90")),
           ("fast", canonical_spec(p, dt, "sm90", **fast)),
           ("fast-det", canonical_spec(p, dt, "sm90", deterministic=True, **fast)),
           ("fast-bk", canonical_spec(p, dt, "sm90", b_kmajor=True, **fast))]
    base = out[1][1]
    out += [("fast-amajor", dataclasses.replace(base, a_kmajor=False)),
            ("fast-buffer", dataclasses.replace(base, aux_ring=False)),
            ("split4", dataclasses.replace(out[0][1], split_k=4))]
    if dt == "float16":
        out.append(("defaults", default_spec(p, dt)))
    return out


def sources():
    out = {}
    for pname, p in programs().items():
        dt = "bfloat16" if "bf16" in pname or "bfloat16" in pname else "float32" if "f32" in pname else "float16"
        if dt != "float32":
            for sname, spec in specs(p, dt):
                for cfg in tiles(spec):
                    try:
                        cfg = fit_stages(p, spec, cfg)
                    except UnsupportedError:
                        continue
                    out[f"sm90/{pname}/{sname}/{cfg.label()}"] = generate(p, spec, cfg)
        spec = canonical_spec(p, dt, "sm80")
        for cfg in tiles(spec):
            out[f"sm80/{pname}/{cfg.label()}"] = generate(p, spec, cfg)
    return out


if __name__ == "__main__":
    main(sources, __doc__.splitlines()[0])
