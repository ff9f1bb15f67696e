"""One call of a compiled kernel: bind -> select -> build -> launch, then return results.

Variants are compiled lazily per (mainloop, operand dtype, A/B layout) because the Program does
not fix the operands' layout; select.py says which variant a call takes and why (row-major,
column-major or batch-shared A/B take the tensor-core path when cp.async can read them, 16-byte
aligned rows; anything else the SIMT path).
"""
import math

import numpy as np

from evt_core.bind import bind
from evt_core.call import fast_signature, poison_requested, scalar_value
from evt_core.errors import EvtError, UnsupportedError
from evt_core.tree.ops import Op

from ..gpu import streams
from ..gpu.fastmath import chosen_fast_ops
from ..gpu.reductions import dense_as_workspace, identity_bits
from . import select
from .codegen.abi import finish_params, main_params
from .codegen.finish import THREADS as FINISH_THREADS, finish_source
from .codegen.mainloop_mma import MMA_TILE, mma_source
from .codegen.mainloop_sm90 import module_prelude, sm90_params, sm90_source
from .codegen.mainloop_simt import GPU_TILING, SIM_TILING, simt_source
from .runtime import arrays, build, driver, fastcall, launch_sm90
from .select import address, simulator


class Runner:
    def __init__(self, program, options, base_key):
        self.p, self.det, self.base_key = program, bool(options.get("deterministic")), base_key
        self.force_simt = bool(options.get("simt"))
        self.fast_mainloop = bool(options.get("fast_mainloop"))
        self.sm90 = bool(options.get("sm90"))
        self.schedule = options.get("sm90_schedule", "auto")
        self.epilogue = options.get("sm90_epilogue", "auto")
        self.fast = chosen_fast_ops(program, options.get("fast_math", "auto"))
        self.aux_ring = bool(options.get("aux_ring", True))
        tile_n = options.get("sm90_tile_n", "auto")
        self.tile_n = tile_n if tile_n == "auto" else int(tile_n)
        self.split_k = options.get("split_k", 1)
        self._split = launch_sm90.SplitBuffers()     # split-K's partials and counters, never freed
        self._fns = {}
        self._finish = None   # finish_function()
        self._ws = {}
        self._plans = {}      # call signature -> _Plan (bind's checks passed for it once)
        self.stages = {}
        self._order = streams.WorkspaceOrder()   # one call at a time; workspaces across streams
        self._fast = {}       # fastcall.key -> FastCall (torch/CuPy repeated calls)

    # ---- compile ----------------------------------------------------------------------------

    def variant(self, b, a_ptr=None, b_ptr=None, in_ptrs=(), out_ptrs=()):
        """The mainloop variant of this call (select.variant: which and why); records the sm90
        choice or fallback reason under kernel.stages["sm90"]."""
        chosen, note = select.variant(b, a_ptr, b_ptr, self.force_simt, self.sm90, self.schedule, self.p, in_ptrs,
                                      self.det, out_ptrs, self.epilogue, self.fast, self.aux_ring, self.tile_n,
                                      self.split_k)
        if note is not None:
            self.stages["sm90"] = note
        return chosen

    def function(self, variant):
        if variant in self._fns:
            return self._fns[variant]
        if variant[0] == "sm90":
            _, ab, kmajor, a_batched, b_batched, pingpong, aux_async, frag, a_kmajor, bn, ring, overlap, split = variant
            main = module_prelude(ab, kmajor, a_kmajor, bn) + "\n" + sm90_source(
                self.p, ab, kmajor, a_batched, b_batched, self.det, pingpong, aux_async, frag,
                self.fast if frag else (), a_kmajor, bn, ring, overlap, split)
            fns = {"main": self._load(variant, main, "evt_kernel", sm90_params(self.p, frag, ring, split),
                                      launch_sm90.shared_bytes(self.p, self.det, pingpong, aux_async, frag, bn, ring))}
        else:
            main = (simt_source(self.p, variant[1], SIM_TILING if simulator() else GPU_TILING, self.det)
                    if variant[0] == "simt" else
                    mma_source(self.p, *variant[1:], self.det, fast_mainloop=self.fast_mainloop))
            fns = {"main": self._load(variant, main, "evt_kernel", main_params(self.p))}
        self._fns[variant] = fns
        return fns

    def finish_function(self):
        """The reduction finish kernel, built on the first call that needs one: a call whose
        reductions are all direct (direct_reduction) never does, so its first call does not
        pay for a second numba build (0.15-0.4 s on the CPU)."""
        if self._finish is None:
            self._finish = self._load(("finish",), finish_source(self.p), "evt_finish", finish_params(self.p))
        return self._finish

    def _load(self, variant, body, name, params, dynamic_shared=0):
        key = build.cache_key(self.base_key, variant, self.det, build.CODE_VERSION)
        if simulator():
            from numba import cuda
            src = build.module_source(body, key, simulator=True)
            self.stages[f"source_{'_'.join(map(str, variant))}"] = src
            fn = cuda.jit(build.load_python(src, name, key))
            build.COMPILES["count"] += 1
            return fn
        built = build.build(key, body, name, params, sm90a=variant[0] == "sm90")
        self.stages[f"source_{'_'.join(map(str, variant))}"] = built.source
        if built.ptx:
            self.stages[f"ptx_{'_'.join(map(str, variant))}"] = built.ptx
        return driver.Function(built.image, built.entry, [p.kind for p in params], dynamic_shared)

    # ---- run --------------------------------------------------------------------------------

    def __call__(self, A, B, inputs):
        if self.sm90:     # first: after a trap every driver call fails, this says why
            launch_sm90.check_watchdog()
        with self._order.lock:
            return self._call(A, B, inputs)

    def fast_call(self, args, inputs):
        """Kernel.__call__'s hook for the repeated call (evt_core.backend): the raw arguments of
        kernel(A, B, **inputs), the result when a FastCall has their signature, else None (the
        checked path). A FastCall exists only for a key a checked call produced, so this call
        passes normalize_call and bind's checks alike, and the watchdog comes after them as in
        __call__."""
        A, B = args
        sig = fast_signature(A, B, inputs)
        fast = self._fast.get(sig[0]) if sig is not None else None
        if fast is None:
            return None
        if self.sm90:
            launch_sm90.check_watchdog()
        with self._order.lock:
            return fast.run(sig[1])

    def _call(self, A, B, inputs):
        # a normalised call the hook did not take (an int scalar, A= by name): maybe a replay still
        sig = fast_signature(A, B, inputs)     # None for NumPy arrays (so under the simulator)
        fast = self._fast.get(sig[0]) if sig is not None else None
        out = fast.run(sig[1]) if fast is not None else None
        if out is not None:
            return out
        side = arrays.side_of(A)
        if side is None:
            raise UnsupportedError(f"A must be a NumPy array or a CUDA array, got {type(A).__name__}")
        scalars = set(self.p.scalars)     # NumPy scalars have a shape too; they are numbers here
        for name, x in [("B", B)] + [(k, v) for k, v in inputs.items() if hasattr(v, "shape") and k not in scalars]:
            if arrays.side_of(x) != side:
                raise UnsupportedError(f"{name} is a {arrays.side_of(x) or type(x).__name__} array but A is a "
                                       f"{side} array; pass all arrays from one side (host NumPy or one GPU library)")
        if side != "numpy" and simulator():
            raise UnsupportedError("the CUDA simulator runs only NumPy inputs")
        va = arrays.view(A, side, "A")
        vin = {k: (arrays.view(v, side, f"input {k!r}") if hasattr(v, "shape") and k not in scalars else v)
               for k, v in inputs.items()}
        vb = arrays.view(B, side, "B")
        key = _signature(side, va, vb, vin)
        plan = self._plans.get(key)
        b = plan.rebind(va, vb, vin, arrays.allocator(side, va)) if plan is not None else None
        if b is None:     # first call with this signature (or a bad scalar): the full checks
            b = bind(self.p, va, vb, vin, arrays.allocator(side, va), arrays.fill)
            self._plans[key] = _Plan(self.p, b)
        if simulator() and b.dtype == "bfloat16":
            raise UnsupportedError("the CUDA simulator has no bfloat16; run bf16 on a GPU")
        mirrors = _Mirrors(side)
        values = self._main_values(b, mirrors)
        stream = 0 if simulator() else streams.current_stream(side)
        out0 = 12 + 4 * len(self.p.inputs) + len(self.p.scalars)
        out_pos = list(range(out0, out0 + 4 * len(self.p.outputs), 4))
        in_ptrs = values[12:out0 - len(self.p.scalars):4]
        variant = self.variant(b, values[0], values[1], in_ptrs, [values[q] for q in out_pos])
        maps = split = None
        if variant[0] == "sm90":     # the tensor maps embed the operands' addresses: a replay refills them
            capturing = side != "numpy" and streams.capturing(stream)
            # the epilogue's maps: every output's (fragment epilogue), then every (M, N) input's (aux_ring)
            out_geo = launch_sm90.output_maps(b, self.p) if variant[7] else ()
            ring_ks = launch_sm90.ring_inputs(self.p, variant[10])
            geo = out_geo + (launch_sm90.input_maps(b, self.p) if ring_ks else ())
            epi_ptrs = [values[q] for q in out_pos][:len(out_geo)] + [in_ptrs[k] for k in ring_ks]
            ptrs = launch_sm90.map_pointers(launch_sm90.problem(b), values[0], values[1], variant[2], variant[9],
                                            stream, capturing, tuple(zip(epi_ptrs, geo)))
            if ptrs is None:
                variant, _ = select.variant(b, values[0], values[1], self.force_simt, False)
                self.stages["sm90"] = ("fallback to the mma.sync kernel: a CUDA graph is being captured and every "
                                       "tensor-map slot is in use (new slots cannot be allocated during capture)")
            else:
                maps = (len(values) + 3 * len(self.p.reductions),
                        launch_sm90.ReplayMaps(launch_sm90.problem(b), variant[2], variant[9], geo),
                        len(out_geo), ring_ks)
                if variant[12]:     # split-K: [ns, partials, counters], the kernel's last parameters
                    split = self._split.pointers(b, variant[9], select.sm90_splits(b, self.split_k), stream,
                                                 capturing)
                    if split is None:
                        variant = variant[:12] + (False,)
                        self.stages["sm90"] += (" (not this call: a CUDA graph is being captured and split-K's "
                                                "buffers would have to grow, so it runs unsplit)")
        fns = self.function(variant)
        grid, block, partial_grid = self._launch_shape(b, variant, split[0] if split else 1)
        ordered = bool(self.p.reductions or split) and not simulator()    # calls sharing workspaces
        if ordered:
            self._order.before(stream)
        red_ptrs = [mirrors.ptr(t.array, True) for t in b.reductions]
        ws_at = len(values)
        ws = self._workspaces(b, partial_grid, stream, red_ptrs)
        values += [v for w in ws for v in (w["ptr"], w["wm"], w["wn"])]
        if maps is not None:
            values += launch_sm90.extra_values(b, ptrs, variant[9]) + (split or [])
        self._launch(fns["main"], grid, block, values, stream)
        fv = fgrid = None
        finishing = not all(w["direct"] for w in ws)     # (no reduction: nothing to finish)
        if finishing:
            fv = [b.L, b.M, b.N]
            for w, t, ptr in zip(ws, b.reductions, red_ptrs):
                fv += [w["ptr"], w["pl"], w["pm"], w["pn"], w["wm"], w["wn"], ptr]
                fv += list(t.strides)
            fgrid = (math.ceil(max(w["count"] for w in ws) / FINISH_THREADS), 1, 1)
            self._launch(self.finish_function(), fgrid, (FINISH_THREADS, 1, 1), fv, stream)
        if ordered:
            self._order.after(stream)
        if sig is not None and side in ("torch", "cupy") and not _cupy_bf16_outputs(side, b):
            if len(self._fast) >= 64:
                self._fast.clear()
            finish = (self.finish_function(), fv, fgrid, (FINISH_THREADS, 1, 1)) if finishing else None
            self._fast[sig[0]] = fastcall.FastCall(self, side, b, values, fns, grid, block, ws, list(inputs), A,
                                                   finish, maps, ws_at, ordered)
        mirrors.download()
        return {k: arrays.result_object(v, side) for k, v in b.result.items()}

    def _main_values(self, b, mirrors):
        v = [mirrors.ptr(b.A), mirrors.ptr(b.B), b.L, b.M, b.N, b.K, *b.a_strides, *b.b_strides]
        for t in b.inputs:
            v += [mirrors.ptr(t.array), *t.strides]
        v += list(b.scalars)
        for t in b.outputs:
            v += [mirrors.ptr(t.array, True), *t.strides]
        return v

    def _launch_shape(self, b, variant, splits=1):
        """(grid, block, partial grid): the last is (n blocks, m blocks, L) of the deterministic
        reduction partials, the grid itself except for the persistent sm90 kernel (over split-K's
        tiles x splits units where it splits)."""
        if variant[0] == "sm90":
            return launch_sm90.grid(b, variant[5], variant[9], splits)
        t = MMA_TILE if variant[0] == "mma" else SIM_TILING if simulator() else GPU_TILING
        grid = (math.ceil(b.N / t.BN), math.ceil(b.M / t.BM), b.L)
        return grid, (t.threads, 1, 1), grid

    def _workspaces(self, b, grid, stream=0, red_ptrs=()):
        """fp32 workspace per reduction, shaped (WL, WM, WN): a kept axis at full extent, a reduced
        axis at one slot (atomic) or one slot per CTA along it (deterministic). A `direct`
        reduction (direct_reduction) has none: the kernel's atomics go into its output
        (red_ptrs[k]) itself, which starts from the identity, and no finish kernel reads it. All
        reductions of a call are direct or none is (the finish kernel, replayed, reads the
        workspaces of the call it was recorded with)."""
        out, shapes = [], []
        for red in self.p.reductions:
            o = red.over
            pl = b.L if ("L" in o and self.det) else 1
            pm = grid[1] if ("M" in o and self.det) else 1
            pn = grid[0] if ("N" in o and self.det) else 1
            shapes.append((pl, pm, pn, b.L if "L" not in o else pl, b.M if "M" not in o else pm,
                           b.N if "N" not in o else pn))
        direct = not simulator() and all(direct_reduction(red, self.det, sh[3:], t.strides)
                                         for red, sh, t in zip(self.p.reductions, shapes, b.reductions))
        for k, (red, (pl, pm, pn, wl, wm, wn)) in enumerate(zip(self.p.reductions, shapes)):
            o = red.over
            n = wl * wm * wn
            buf = None if direct else self._buffer(k, n)
            ptr = red_ptrs[k] if direct else buf if simulator() else buf.ptr
            if not self.det:   # atomics combine into it: start from the identity
                bits = _workspace_bits(red)
                if simulator():
                    buf[:n] = np.array([bits], np.uint32).view(np.float32)[0]
                else:
                    driver.memset32(ptr, bits, n, stream)
            count = (1 if "L" in o else b.L) * (1 if "M" in o else b.M) * (1 if "N" in o else b.N)
            out.append(dict(ptr=ptr, pl=pl, pm=pm, pn=pn, wm=wm, wn=wn, count=count, direct=direct,
                            buf=buf, n=n, bits=None if self.det else _workspace_bits(red)))
        return out

    def _buffer(self, k, n):
        have = self._ws.get(k)
        if have is None or (len(have) if simulator() else have.nbytes // 4) < n:
            have = np.empty(n, np.float32) if simulator() else driver.DeviceBuffer(4 * n)
            self._ws[k] = have
        return have

    def _launch(self, fn, grid, block, values, stream=0):
        if simulator():
            fn[grid, block](*values)
        else:
            fn.launch(grid, block, values, stream)


def direct_reduction(red, det, extents, strides):
    """Whether reduction `red`'s atomics can combine straight into its output instead of an fp32
    workspace that a finish kernel then copies: atomic mode, SUM or AMAX (the finish kernel
    would only copy them: no MEAN division, no AMIN negation), an fp32 output (the atomics' own
    type), laid out as the dense (WL, WM, WN) workspace would be (element strides (WM WN, WN, 1)
    over every axis of extent > 1), so the kernel's index is the output's. Saves the finish
    launch (the cupy backend's direct reductions: one kernel per call fewer for W3 and W4)."""
    if det or red.op not in (Op.SUM, Op.AMAX) or red.operand.dtype != "float32":
        return False
    return dense_as_workspace(strides, extents)


def _workspace_bits(red):
    """The atomic workspace's initial fp32 bits: the reduction's identity (AMIN is carried as
    the AMAX of the negated value, codegen/epilogue.py)."""
    return identity_bits(red.op, negated=red.op is Op.AMIN)


def _cupy_bf16_outputs(side, b):
    """CuPy bf16 outputs are returned through a dtype view the fast path does not rebuild."""
    return side == "cupy" and any(str(t.array.dtype) == "bfloat16" for t in b.outputs + b.reductions)


def _signature(side, va, vb, vin):
    """Everything bind's checks and allocations depend on: shapes, strides, dtypes, names (and
    16-byte alignment, which picks the mainloop)."""
    def sig(x):
        if not (isinstance(x, np.ndarray) or hasattr(x, "ptr")):    # a scalar (NumPy scalars too)
            return None
        return (tuple(x.shape), tuple(x.strides), str(x.dtype), address(x) % 16 == 0)
    return (side, sig(va), sig(vb), tuple((k, sig(v)) for k, v in sorted(vin.items())))


class _Plan:
    """What bind computed for one call signature, replayed without re-checking: the frame
    strides of every tensor and the allocation spec of every output. bind's host cost (tens of
    microseconds) would otherwise dominate small launches."""

    def __init__(self, program, b):
        # the problem and A/B strides only: holding b's arrays would keep the first call's
        # outputs alive (torch's CUDA-graph trees refuse allocations nobody returned)
        self.p = program
        self.problem = (b.L, b.M, b.N, b.K, b.a_strides, b.b_strides, b.dtype)
        self.in_strides = [t.strides for t in b.inputs]
        self.out_specs = [_spec(t) for t in b.outputs]
        self.red_specs = [_spec(t) for t in b.reductions]

    def rebind(self, va, vb, vin, alloc):
        from evt_core.bind import Bound, Tensor
        try:    # the same check bind makes; a refusal falls back to bind for its message
            scalars = [scalar_value(n, vin[n]) for n in self.p.scalars]
        except (EvtError, KeyError):
            return None
        poison = poison_requested()

        def make(spec):
            shape, dtype, strides, frame = spec
            arr = alloc(shape, dtype, strides)
            if poison:
                arrays.fill(arr, float("nan"))
            return Tensor(arr, frame)
        outs = [make(s) for s in self.out_specs]
        reds = [make(s) for s in self.red_specs]
        by_name = {op.name: t.array for op, t in zip(self.p.outputs, outs)}
        by_name.update({r.name: t.array for r, t in zip(self.p.reductions, reds)})
        ins = [Tensor(vin[op.name], st) for op, st in zip(self.p.inputs, self.in_strides)]
        L, M, N, K, a_strides, b_strides, dtype = self.problem
        return Bound(L, M, N, K, va, vb, a_strides, b_strides, dtype, ins, scalars, outs, reds,
                     {n: by_name[n] for n in self.p.result_names})


def _spec(t):
    from evt_core.dtypes import dtype_name
    x = t.array
    item = np.dtype(x.dtype).itemsize
    return (tuple(x.shape), dtype_name(x.dtype, "output"), tuple(s // item for s in x.strides), t.strides)


class _Mirrors:
    """Device addresses of bound arrays. NumPy arrays get device mirrors of their byte span
    (inputs uploaded; outputs uploaded only when poisoned, then downloaded after the kernel).
    In the simulator a mirror is a flat typed NumPy view of the same memory."""

    def __init__(self, side):
        self.side, self.back = side, []

    def ptr(self, x, output=False):
        if self.side != "numpy":
            return x.ptr
        raw = arrays.host_bytes(x)
        if simulator():
            if not output:      # the simulator copies every argument back after the kernel:
                raw = raw.copy()     # into a read-only mapping (np.memmap mode "r") that faults
            return raw.view(x.dtype) if raw.size else np.empty(1, x.dtype)
        buf = driver.DeviceBuffer(raw.size)
        if not output or poison_requested():
            buf.upload(raw)
        if output:
            self.back.append((buf, raw))
        self.keep = getattr(self, "keep", []) + [buf]
        return buf.ptr

    def download(self):
        for buf, raw in self.back:
            buf.download(raw)
