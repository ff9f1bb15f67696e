"""The "cupy" backend: generated CUDA C++ (inline PTX mma.sync / wgmma + TMA) built by NVRTC
through CuPy. Nothing here imports CuPy at module import; `available()` and the first call do.
"""
from evt_core.backend import Backend, Kernel, Support
from evt_core.errors import UnsupportedError
from evt_core.tree.ops import Op

from ..gpu import splitk
from .codegen.plan import REDUCE_OPS, TileConfig
from .codegen.spelling import CUDA_SPELLING
from .runner import CupyRunner

MAINLOOPS = ("auto", "sm80", "sm90")
_LEAVES_AND_SINKS = {Op.ACCUM, Op.LOAD, Op.SCALAR, Op.CONST, Op.STORE, *REDUCE_OPS}


class CupyBackend(Backend):
    name = "cupy"
    # aux_tma / tma_store_all / fast_math (docs/backend-cupy.md): on by default; each falls back
    # per tensor where layouts or shared memory forbid it (kernel.stages["fast_paths"] says so).
    # fast_math="auto": approximate transcendentals only where every result is stored in 16 bits.
    options = {"mainloop": "auto", "deterministic": False, "autotune": True, "tile": None,
               "aux_tma": True, "tma_store_all": True, "fast_math": "auto",
               # aux_tma inputs through the mainloop's ring after each tile's k-blocks (False: a
               # shared-memory buffer of their own, which costs pipeline stages)
               "aux_ring": True,
               # an M-major A (a weight gradient's transposed activations) loaded by TMA and fed to
               # wgmma transposed (False: such an A takes the scalar sm80 loader)
               "a_mn_major_tma": True,
               # sm90 cooperative: split K over this many CTAs per output tile, for few-tile,
               # long-K GEMMs (weight gradients over many rows); "auto": as many as fill one
               # wave where the tiles fill under half of the SMs and K >= 4096, else 1
               # (backends/gpu/splitk.split_count)
               "split_k": "auto"}

    def available(self):
        try:
            import cupy as cp
        except Exception as e:  # noqa: BLE001 - any import failure means "not here"
            return Support(False, f"cupy is not installed ({type(e).__name__}: {e}); pip install cupy-cuda13x")
        try:
            if cp.cuda.runtime.getDeviceCount() < 1:
                return Support(False, "no CUDA device")
            cc = cp.cuda.Device().compute_capability
        except Exception as e:  # noqa: BLE001
            return Support(False, f"no CUDA device ({type(e).__name__}: {e})")
        if int(cc) < 80:
            return Support(False, f"the GPU is sm_{cc}; the cupy backend needs sm_80 or newer (mma.sync, cp.async)")
        return Support.yes()

    def supports(self, tree, options):
        for ins in tree.program.instrs:
            if ins.op not in _LEAVES_AND_SINKS and ins.op not in CUDA_SPELLING:
                return Support(False, f"op {ins.op.value} has no CUDA spelling in the cupy backend", ins)
        return Support.yes()

    def compile(self, tree, options):
        """evt_core.compile has checked the option names, available() and supports(); the
        values of this backend's own options are checked here."""
        opts = {**self.options, **options}
        if opts["mainloop"] not in MAINLOOPS:
            raise UnsupportedError(f"mainloop={opts['mainloop']!r} is not one of {MAINLOOPS}")
        if opts["fast_math"] not in (True, False, "auto"):
            raise UnsupportedError(f"fast_math={opts['fast_math']!r} is not True, False or 'auto'")
        if not splitk.valid_option(opts["split_k"]):
            raise UnsupportedError(f"split_k={opts['split_k']!r}: pass an int from 1 to {splitk.MAX_SPLITS}, or 'auto'")
        for flag in ("a_mn_major_tma", "aux_ring"):
            if type(opts[flag]) is not bool:
                raise UnsupportedError(f"{flag}={opts[flag]!r}: pass True or False")
        if isinstance(opts["tile"], str):      # a label, as TileConfig.label() spells it
            try:
                opts["tile"] = TileConfig.from_label(opts["tile"])
            except ValueError as e:
                raise UnsupportedError(f"tile={opts['tile']!r}: {e}") from None
        if opts["tile"] is not None and not isinstance(opts["tile"], TileConfig):
            raise UnsupportedError("tile= takes a backends.cupy.codegen.plan.TileConfig, its label "
                                   "(e.g. '128x128x64/s6/ov') or None")
        runner = CupyRunner(tree.program, opts)
        stages = {"program": tree.program.describe(), "cuda_c": runner.preview_source()}
        runner.stages = stages       # each new call layout records stages["fast_paths"]
        return Kernel(self.name, tree, runner, stages, opts)

    def hash(self):
        return "cupy-1"
