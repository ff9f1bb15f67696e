"""One call of a compiled cupy kernel: bind -> select (or autotune) -> build -> launch, then
return results; a repeated call with the same signature replays the prepared launch (_FastPlan).
"""
import numpy as np

from evt_core.bind import bind
from evt_core.call import fast_signature, poison_requested
from evt_core.errors import UnsupportedError

from ..gpu import streams
from . import autotune
from .runtime.arrays import Allocator, OutputMaker, side_of, to_device
from .runtime.launcher import stream_side
from .select import (candidates, decide_spec, fast_ops, fast_path_summary, fit_stages, generate,
                     overlap_or_cooperative, smem_bytes)


class CupyRunner:
    """The Kernel's `run`: binds a call, picks (or tunes) the compiled variant, launches."""

    def __init__(self, program, options):
        self.program, self.options = program, options
        self._compiled = {}      # (Spec, TileConfig) -> CompiledKernel
        self._choice = {}        # (Spec, shape class) -> CompiledKernel
        self._device = None
        self._plans = {}         # call signature -> _FastPlan
        self.stages = None       # the Kernel's stages dict (set by CupyBackend.compile)

    def preview_source(self):
        """The source for the canonical layout (row-major, aligned, sm90 where possible), so
        Kernel.source exists before the first call; also catches generator bugs at compile()."""
        from .codegen.plan import N_BROADCAST, N_UNIT_PAIR, Spec
        p = self.program
        dt = "float16"
        cls = lambda ops: tuple(N_UNIT_PAIR if p.spans(o)[2] else N_BROADCAST for o in ops)  # noqa: E731
        spec = Spec(dt, "sm80" if self.options["mainloop"] == "sm80" else "sm90",
                    "async" if self.options["mainloop"] == "sm80" else "tma",
                    "async" if self.options["mainloop"] == "sm80" else "tma", False, p.batched, p.batched,
                    cls(p.inputs), cls(p.outputs), -1, bool(self.options["deterministic"]),
                    fast_math=self.options["fast_math"] is True,
                    fast_ops=fast_ops(p) if self.options["fast_math"] == "auto" else ())
        return generate(p, spec, candidates(p, spec)[0])

    def _device_info(self):
        if self._device is None:
            import cupy as cp
            dev = cp.cuda.Device()
            cc = dev.compute_capability
            name = cp.cuda.runtime.getDeviceProperties(dev.id)["name"]
            self._device = ((int(cc[:-1]), int(cc[-1])), name.decode() if isinstance(name, bytes) else str(name),
                            dev.attributes["MultiProcessorCount"])
        return self._device

    def _build(self, spec, cfg):
        from .runtime.launcher import CompiledKernel
        key = (spec, cfg)
        k = self._compiled.get(key)
        if k is None:
            k = CompiledKernel(self.program, spec, cfg, generate(self.program, spec, cfg),
                               smem_bytes(self.program, spec, cfg))
            self._compiled[key] = k
        return k

    def _forced_tile(self, spec, report):
        """The forced `tile` option's kernel. Where its stages leave no room for the epilogue's
        staging buffers, the broadcast-vector buffers, then aux TMA loads, then the extra TMA
        stores give way (slower, never refused), and `report` says so. An overlapped tile
        (TileConfig(overlap=True)) that this call's kind cannot take runs cooperative
        (select.overlap_or_cooperative says why in `report`)."""
        import dataclasses
        err = None
        tile = overlap_or_cooperative(self.program, spec, self.options["tile"], report)
        steps = [({}, None), ({"tile_vecs": False}, "broadcast vectors loaded per fragment"),
                 ({"tile_vecs": False, "aux_tma": ()}, "aux inputs loaded per fragment"),
                 ({"tile_vecs": False, "aux_tma": (), "tma_extra": ()}, "extra outputs stored per fragment")]
        for change, why in steps:
            lighter = dataclasses.replace(spec, **change)
            try:
                cfg = fit_stages(self.program, lighter, tile)
            except UnsupportedError as e:
                err = e
                continue
            if why:
                report.append(f"tile {tile.label()} leaves no shared memory for the staging buffers: {why}")
            return self._build(lighter, cfg)
        raise err

    def _select(self, spec, bound, report=None):
        sc = autotune.shape_class(bound)
        k = self._choice.get((spec, sc))
        if k is not None:
            return k
        configs = candidates(self.program, spec, bound.K)
        if self.options["tile"] is not None:
            k = self._forced_tile(spec, report if report is not None else [])
        elif not self.options["autotune"] or len(configs) == 1:
            k = self._build(spec, configs[0])
        else:
            key = autotune.cache_key(self.program, spec, bound, self._device_info()[1])
            label = autotune.load(key)
            hit = [c for c in configs if c.label() == label]
            if hit:
                k = self._build(spec, hit[0])
            else:
                k, _ = autotune.tune(configs, lambda c: self._build(spec, c), bound)
                k = k or self._build(spec, configs[0])
                autotune.store(key, k.cfg.label())
        self._choice[(spec, sc)] = k
        return k

    def fast_call(self, args, inputs):
        """Kernel.__call__'s hook for the repeated call (evt_core.backend): the raw arguments of
        kernel(A, B, **inputs), the result when a plan has their signature, else None (the
        checked path). A plan exists only for a key a checked call produced, so this call
        passes normalize_call and bind's checks alike."""
        plan = self._plans.get(_signature(args[0], args[1], inputs))
        return plan.run(poison_requested()) if plan is not None else None

    def __call__(self, A, B, inputs):
        poison = poison_requested()
        sig = _signature(A, B, inputs)
        plan = self._plans.get(sig) if sig is not None else None
        if plan is not None:     # repeated call on the same device buffers: skip bind and selection
            return plan.run(poison)
        side = side_of(A)
        dA, dB = to_device(A, "A"), to_device(B, "B")
        scalars = set(self.program.scalars)
        # NumPy inputs are uploaded by bind, after their layout checks (a layout that strides
        # cannot express gets a frame-shaped host copy first)
        dev = {k: v if k in scalars or isinstance(v, np.ndarray) or not (hasattr(v, "shape") or _is_array(v))
               else to_device(v, f"input {k!r}") for k, v in inputs.items()}
        alloc = _RecordingAllocator(side, A)
        bound = bind(self.program, dA, dB, dev, alloc.alloc, alloc.fill, upload=to_device)
        report = []
        spec = decide_spec(self.program, bound, self.options, self._device_info()[0], report,
                           sms=self._device_info()[2])
        kernel = self._select(spec, bound, report)
        if self.stages is not None:
            self.stages["fast_paths"] = fast_path_summary(self.program, kernel.spec, kernel.cfg, report)
        prepared = kernel.prepare(bound)
        made = alloc.made
        prepared.fire([a.ptr for a in made], side)
        self.last = kernel
        if sig is not None:
            if len(self._plans) > 64:
                self._plans.clear()
            index = {id(a): i for i, a in enumerate(made)}
            names = tuple((n, index[id(a)]) for n, a in bound.result.items())
            self._plans[sig] = _FastPlan(side, OutputMaker(side, A, alloc.calls), names, prepared)
        return {name: alloc.result(arr) for name, arr in bound.result.items()}

    def watchdog_fired(self):
        """True when any compiled kernel's bounded mbarrier wait timed out (a pipeline bug)."""
        return any(k.watchdog_fired() for k in self._compiled.values())


def _is_array(v):
    return hasattr(v, "__cuda_array_interface__") or hasattr(v, "__dlpack__")


class _RecordingAllocator(Allocator):
    """Remembers every allocation bind makes (outputs, then reduction outputs, in order), so
    a repeated call can allocate the same shapes without binding again."""

    def __init__(self, side, like):
        super().__init__(side, like)
        self.calls, self.made = [], []

    def alloc(self, shape, dtype_name, strides):
        arr = super().alloc(shape, dtype_name, strides)
        self.calls.append((shape, dtype_name, strides))
        self.made.append(arr)
        return arr


class _FastPlan:
    def __init__(self, side, outputs, names, prepared):
        self.outputs, self.names, self.prepared = outputs, names, prepared
        self.stream = streams.stream_getter(stream_side(side))     # the query; asked on every run

    def run(self, poison):
        ptrs, results = self.outputs.make(poison)
        self.prepared.fire_on(ptrs, self.stream())
        return {n: results[i] for n, i in self.names}


def _signature(A, B, inputs):
    """The plan key of a call: evt_core.call.fast_signature's key, the pointers and scalar
    values (a plan's prepared arguments embed them) and the current device; None when no plan
    can apply (NumPy or foreign arrays, other scalar types, no CuPy)."""
    sig = fast_signature(A, B, inputs)
    if sig is None:
        return None
    device = _current_device()
    return (sig[0], tuple(sig[1]), device) if device is not None else None


_get_device = []      # cupy.cuda.runtime.getDevice, looked up once


def _current_device():
    try:
        if not _get_device:
            import cupy as cp
            _get_device.append(cp.cuda.runtime.getDevice)
        return _get_device[0]()
    except Exception:  # noqa: BLE001 - no CuPy or no device: no plan
        return None
