"""The `numba_cuda` Backend: the project's default GPU path.

compile() validates options and the Program, generates the SIMT source eagerly (so generator
bugs surface at compile time, cheaply) and returns a Kernel whose Runner compiles each mainloop
variant on first use through the memory + disk cache (the A/B dtype and layout are known only
at call time). Kernels for the same Program and options share one Runner in this process.
"""
import importlib.util
from collections.abc import Mapping
import os
import threading

from evt_core.backend import Backend, Kernel, Support
from evt_core.tree.ops import LEAVES, Op

from ..gpu import splitk
from .codegen.spelling import SPELLING

_STRUCTURAL = LEAVES | {Op.STORE, Op.SUM, Op.MEAN, Op.AMAX, Op.AMIN}
_runners = {}
_lock = threading.Lock()


SM90_SCHEDULES = ("auto", "pingpong", "cooperative", "overlap")
SM90_EPILOGUES = ("auto", "fragment", "staged")
SM90_TILE_NS = ("auto", 128, 256)


class NumbaCudaBackend(Backend):
    name = "numba_cuda"
    options = {
        "deterministic": False,   # per-CTA partials + ordered finish instead of atomics: bit-identical runs
        "simt": False,            # force the SIMT mainloop even for fp16/bf16 (debugging, comparisons)
        "fast_mainloop": True,    # tensor-core k-loop with hoisted address math (spill-free); False: the original loop
        # fp16/bf16 on sm_90: the warp-specialised wgmma + TMA kernel (codegen/mainloop_sm90.py) where the
        # call fits it, else the mma.sync kernel (what other GPUs run), the reason in
        # kernel.stages["sm90"]. False: the mma.sync kernel everywhere (comparisons, debugging).
        "sm90": True,
        # the sm90 kernel's schedule: "pingpong" (each consumer warpgroup owns whole tiles, one's
        # epilogue overlaps the other's mainloop), "cooperative" (both warpgroups share every
        # tile), "overlap" (cooperative with two accumulator sets: a tile's epilogue runs between
        # the next tile's k-blocks, codegen/consumer_overlap.py; 128 x 128 fragment-epilogue kinds,
        # else cooperative and kernel.stages["sm90"] says why), or "auto": ping-pong where every
        # CTA gets two tiles or more (select.sm90_pingpong), overlap at short K with an (M, N)
        # input through the ring (select.sm90_overlap_pays).
        "sm90_schedule": "auto",
        # the sm90 kernel's epilogue: "fragment" evaluates the tree on the wgmma fragments and
        # writes the outputs by TMA stores where the call allows it (select.sm90_fragment: 16-bit
        # N-contiguous outputs, stageable (M, N) inputs), else the "staged" one (fp32 fragments
        # through shared memory into the SIMT epilogue: every op and reduction); "auto" takes the
        # fragment epilogue except where measured slower (libdevice transcendentals without a
        # reduction, or beside an fp32 (M, N) input).
        "sm90_epilogue": "auto",
        # "auto": the fragment epilogue spells tanh / exp / sigmoid / silu / gelu_tanh(_grad) with
        # the MUFU approximations where their values reach only 16-bit stores
        # (backends/gpu/fastmath.py, the cupy backend's rule); True: those and log wherever their
        # values go (Triton's defaults); False: libdevice everywhere.
        "fast_math": "auto",
        # the cooperative fragment epilogue's 16-bit (M, N) inputs: True TMA-loads them through
        # the mainloop's ring after each tile's k-blocks (select.sm90_aux_ring); False copies
        # them with cp.async into buffers of their own (what fp32 inputs always take)
        "aux_ring": True,
        # the sm90 kernel's tile width: 128 (128 x 128 tiles), 256 (128 x 256, m64n256k16) wherever
        # the kernel kind can take it: the cooperative schedule (256 with sm90_schedule="auto"
        # picks it), the fragment epilogue, (M, N) inputs through the ring, no column or
        # whole-tile reduction (select.sm90_wide_tile_refusal); elsewhere a call falls back to
        # 128 and kernel.stages["sm90"] says why. "auto": 256 only for the kinds and problems
        # measured to pay (select.sm90_tile_n). For A/B measurements of the width.
        "sm90_tile_n": "auto",
        # serial split-K for few-tile, long-K GEMMs (codegen/splitk.py, backends/gpu/splitk.py):
        # an int from 1 to 64 (1: off) or "auto" (splitk.split_count's rule on this GPU's SM
        # count). The sm90 kernel then runs the cooperative schedule over (tile, split) units, the
        # last split of a tile summing the fp32 partials in split order (bit-identical runs);
        # calls with (M, N) inputs or a forced ping-pong / overlapped schedule run unsplit and
        # kernel.stages["sm90"] says why. Not yet run on a GPU.
        "split_k": 1,
    }

    def available(self):
        if importlib.util.find_spec("numba") is None or importlib.util.find_spec("numba.cuda") is None:
            return Support(False, "numba-cuda is not installed (pip install 'numba-cuda[cu13]')")
        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
            return Support.yes()
        try:
            from .runtime import driver
            driver.lib()
        except Exception as e:   # available() never raises
            return Support(False, f"no CUDA GPU: {e}")
        return Support.yes()

    def supports(self, tree, options):
        program = tree.program
        for ins in program.instrs:
            if ins.op not in _STRUCTURAL and ins.op not in SPELLING:
                return Support(False, f"numba_cuda cannot compile op {ins.op.value!r}", ins)
        for key in options:
            if key not in self.options:
                return Support(False, f"unknown option {key!r}; numba_cuda takes {sorted(self.options)}")
        if options.get("sm90_schedule", "auto") not in SM90_SCHEDULES:
            return Support(False, f"option sm90_schedule={options['sm90_schedule']!r} is not one of {SM90_SCHEDULES}")
        if options.get("fast_math", "auto") not in ("auto", True, False):
            return Support(False, f"option fast_math={options['fast_math']!r} is not 'auto', True or False")
        if options.get("aux_ring", True) not in (True, False):
            return Support(False, f"option aux_ring={options['aux_ring']!r} is not True or False")
        tile_n = options.get("sm90_tile_n", "auto")
        if isinstance(tile_n, bool) or tile_n not in SM90_TILE_NS:
            return Support(False, f"option sm90_tile_n={tile_n!r} is not one of {SM90_TILE_NS}")
        split_k = options.get("split_k", 1)
        if not splitk.valid_option(split_k):
            return Support(False, f"option split_k={split_k!r} is not an int from 1 to {splitk.MAX_SPLITS} or 'auto'")
        if options.get("sm90_epilogue", "auto") not in SM90_EPILOGUES:
            return Support(False, f"option sm90_epilogue={options['sm90_epilogue']!r} is not one of {SM90_EPILOGUES}")
        return Support.yes()

    def hash(self):
        from .runtime.build import CODE_VERSION
        return f"{self.name}-{CODE_VERSION}"

    def compile(self, tree, options):
        """evt_core.compile has checked the option names, available() and supports()."""
        from .runtime.build import cache_key
        from .codegen.mainloop_simt import GPU_TILING, simt_source
        from .runner import Runner
        opts = {**self.options, **options}
        program = tree.program
        source = simt_source(program, "float32", GPU_TILING, opts["deterministic"])
        base = cache_key(program.key(), sorted(opts.items()), self.hash(), _numba_cuda_version())
        with _lock:
            runner = _runners.get(base)
            if runner is None:
                runner = _runners[base] = Runner(program, opts, base)
        stages = {"program": program.describe(), "source": source}
        return Kernel(self.name, tree, runner, _LiveStages(stages, runner), opts)


class _LiveStages(Mapping):
    """Kernel.stages: the eager stages plus every variant the runner has compiled so far (a
    read-only Mapping, so get/in/items all see the runner's stages: a dict subclass that
    overrode only some methods let .get() miss them)."""

    def __init__(self, eager, runner):
        self._eager = dict(eager)
        self._runner = runner

    def _merged(self):
        return {**self._eager, **self._runner.stages}

    def __getitem__(self, k):
        return self._merged()[k]

    def __iter__(self):
        return iter(self._merged())

    def __len__(self):
        return len(self._merged())

    def __repr__(self):
        return repr(self._merged())


def _numba_cuda_version():
    try:
        from importlib.metadata import version
        return version("numba-cuda")
    except Exception:
        return "unknown"
