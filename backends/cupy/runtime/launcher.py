"""One compiled (Program, Spec, TileConfig): NVRTC build through CuPy, argument packing, launch.

A call signature's first launch packs EpiArgs with one struct.pack, fetches cached tensor maps,
reuses the cached reduction workspace and launches through CuPy: 1 launch (plus init/finish
launches only when the Program has reductions). Its repeated calls replay that launch through
ctypes (`Prepared`).
"""
import ctypes
import math
import struct

import numpy as np

from evt_core.errors import KernelCompileError

from ..codegen.epilogue import arg_layout
from ..codegen.plan import ALL, COL, ELEM, ROW, reduction_kind, row_block, tma_outputs
from ...gpu import splitk, streams
from . import fast_launch
from ...gpu.sm90 import operand_maps, panel_map
from .tensormap import dummy_map, map_bytes, tensor_map

_NVRTC_OPTIONS = ("-std=c++17", "--diag-suppress=177,550")


class CompiledKernel:
    def __init__(self, program, spec, cfg, source, smem):
        import cupy as cp
        self.program, self.spec, self.cfg, self.source, self.smem = program, spec, cfg, source, smem
        opts = _NVRTC_OPTIONS + (("-arch=sm_90a",) if spec.mainloop == "sm90" else ())
        try:
            self.module = cp.RawModule(code=source, options=opts)
            self.main = self.module.get_function("evt_main")
            self.init = self.module.get_function("evt_init")
            self.finish = self.module.get_function("evt_finish")
            if smem > 48 * 1024:
                self.main.max_dynamic_shared_size_bytes = smem
        except Exception as e:  # noqa: BLE001 - any NVRTC/driver failure is a backend bug
            raise KernelCompileError("cupy", "NVRTC build", str(e), source) from e
        self.layout = arg_layout(program, spec.dtype).struct
        codes = self.layout.format.lstrip("<")
        self.n_fields = len(codes)
        self.offsets = [struct.calcsize("<" + codes[:i]) for i in range(len(codes))]   # bytes, per field
        self.args_dtype = np.dtype((np.void, self.layout.size))
        self.threads = 384 if spec.mainloop == "sm90" else 32 * cfg.warps_m * cfg.warps_n
        self.num_sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self._ws = None
        self._splitk = None          # (partials, counters) of split-K kernels, grown on demand
        self.order = streams.WorkspaceOrder()

    # ---- launch geometry ----
    def _geometry(self, b):
        cfg = self.cfg
        bm = (cfg.bm if cfg.pingpong else 128) if self.spec.mainloop == "sm90" else cfg.bm
        mt, nt = -(-b.M // bm), -(-b.N // cfg.bn)
        mblk = -(-b.M // row_block(self.spec, cfg))
        return mt, nt, b.L * mt * nt, mblk

    def _parts(self, red, b, mblk, nt):
        pl = b.L if "L" in red.over else 1
        return pl * {ROW: nt, COL: mblk, ALL: mblk * nt, ELEM: 1}[reduction_kind(red)]

    @staticmethod
    def _elements(red, b):
        return math.prod(e for ax, e in zip("LMN", (b.L, b.M, b.N)) if ax not in red.over)

    def _workspace(self, sizes):
        import cupy as cp
        total = sum(sizes)
        if self._ws is None or self._ws.size < total:
            # earlier Prepared launches keep pointing at the old buffer: keep it alive
            self._ws_old = getattr(self, "_ws_old", []) + [self._ws]
            self._ws = cp.empty(max(total, 1), np.float32)
        ptrs, off = [], 0
        for s in sizes:
            ptrs.append(self._ws.data.ptr + 4 * off)
            off += s
        return ptrs

    # ---- one call ----
    def prepare(self, b):
        """Everything about a launch that depends only on the inputs: the packed-argument
        values with placeholders for output pointers (filled by `Prepared.fire`)."""
        p, spec = self.program, self.spec
        mt, nt, tiles, mblk = self._geometry(b)
        reds = p.reductions
        elems = [self._elements(r, b) for r in reds]
        parts = [self._parts(r, b, mblk, nt) for r in reds]
        ws = self._workspace([e * (pp if spec.deterministic else 1) for e, pp in zip(elems, parts)])
        vals = [b.A.ptr, b.B.ptr, *b.a_strides, *b.b_strides]
        for t in b.inputs:
            vals += [t.array.ptr, *t.strides]
        out_pos, aliases = [], []
        for t in b.outputs:
            out_pos.append(len(vals))
            vals += [0, *t.strides]
        for r, (t, w) in enumerate(zip(b.reductions, ws)):
            out_pos.append(len(vals) + 1)
            if r in spec.direct_reds:                    # the output is the workspace
                aliases.append((len(vals), len(vals) + 1))
            vals += [w, 0, *t.strides]
        vals += [b.L, b.M, b.N, b.K, mt, nt, tiles, mblk, nt, *b.scalars]
        for r, e, pp in zip(reds, elems, parts):
            count = math.prod(ext for ax, ext in zip("LMN", (b.L, b.M, b.N)) if ax in r.over)
            vals += [float(count), pp]
        vals += [0] * (self.n_fields - len(vals))       # the trailing pad field, if any
        maps = self._maps(b) + self._split_k_launch(tiles, b.K) if spec.mainloop == "sm90" else None
        return Prepared(self, vals, out_pos, tiles, maps, max(elems) if elems else 0, tuple(aliases))

    def launch(self, b):
        self.prepare(b).fire([t.array.ptr for t in b.outputs] + [t.array.ptr for t in b.reductions])

    def _split_k_launch(self, tiles, K):
        """(work units, extra kernel parameters): the tiles and none; for split-K the (tile,
        split) units and the partials/counters addresses. Counters start at zero and every
        launch leaves them at zero (codegen/sm90_splitk.py); the buffers only grow."""
        S = self.spec.split_k
        if S == 1:
            return tiles, ()
        import cupy as cp
        ns = splitk.splits_run(S, K, self.cfg.bk)
        floats = splitk.workspace_floats(tiles, S, self.cfg.bn)
        if self._splitk is None or self._splitk[0].size < floats or self._splitk[1].size < 2 * tiles:
            self._splitk_old = getattr(self, "_splitk_old", []) + [self._splitk]   # earlier launches' buffers
            self._splitk = (cp.empty(max(floats, 1), np.float32), cp.zeros(max(2 * tiles, 1), np.uint32))
            # the zeros are written on CuPy's current stream, the kernel may run on another (a
            # torch stream is non-blocking): wait for them here, once per growth
            cp.cuda.get_current_stream().synchronize()
        ws, cnt = self._splitk
        return tiles * ns, (np.uint64(ws.data.ptr), np.uint64(cnt.data.ptr))

    @staticmethod
    def _small_grid(n):
        return max(1, min(-(-n // 256), 4096))

    def _maps(self, b):
        spec, cfg = self.spec, self.cfg
        dt = spec.dtype
        # spec.a_batched / b_batched are "batch stride != 0", the rank rule operand_maps applies
        amap, bmap = operand_maps(b.L, b.M, b.N, b.K, b.a_strides, b.b_strides, spec.b_kmajor, cfg.bn,
                                  cfg.bm if cfg.pingpong else 128, spec.a_kmajor)
        ta, tb = tensor_map(b.A.ptr, dt, *amap), tensor_map(b.B.ptr, dt, *bmap)
        tds = []                 # (output index, dtype, dims, strides, box) per TMA-stored output; pointers per call
        def panels(t, op):
            return panel_map(b.L, b.M, b.N, t.strides, self.program.batched and self.program.spans(op)[0])
        for k in tma_outputs(spec):
            op = self.program.outputs[k]
            tds.append((k, op.dtype, *panels(b.outputs[k], op)))
        # aux_tma: the inputs' maps, 64 x 64 boxes, 128B swizzle
        txs = [tensor_map(b.inputs[k].array.ptr, self.program.inputs[k].dtype, *panels(b.inputs[k], self.program.inputs[k]))
               for k in spec.aux_tma]
        return ta, tb, tds, txs

    def watchdog_fired(self):
        import cupy as cp
        ptr = self.module.get_global("evt_timeout_flag")
        return bool(cp.ndarray((1,), np.int32, memptr=ptr).get()[0])


def stream_side(side):
    """Whose current stream a call of `side` launches on: torch's for torch tensors, else CuPy's."""
    return "torch" if side == "torch" else "cupy"


class Prepared:
    """A launch with everything but the output pointers decided.

    The first `fire` launches through CuPy and, on success, keeps the packed EpiArgs and tensor
    maps in ctypes-addressable buffers of its own with a prebuilt `void**` parameter array; every
    later fire is one `cuLaunchKernel` call per kernel through ctypes. A fire with other output
    pointers than the last one first writes them into those buffers (the EpiArgs pointer fields
    and the TMA-stored outputs' maps): the driver copies parameter values at launch, so a buffer
    may change once its launch is made. A caller that keeps its results (a training step,
    `out = kernel(...)` in a loop) gets new output pointers on most calls, which would otherwise
    each cost a launch through CuPy. EVT_CUPY_FAST_LAUNCH=0 launches through CuPy every time."""
    __slots__ = ("k", "vals", "out_pos", "tiles", "maps", "max_elems", "aliases", "_fast", "_last", "_targets",
                 "_ptr_fields", "_shared_ws")

    def __init__(self, k, vals, out_pos, tiles, maps, max_elems, aliases=()):
        self.k, self.vals, self.out_pos, self.tiles, self.maps, self.max_elems = k, vals, out_pos, tiles, maps, max_elems
        self.aliases = aliases       # (destination, source) argument positions: direct reductions' ws = output
        self._fast = None            # the ctypes launches (fast_launch._Launch), once CuPy has run one
        self._last = None            # the output pointers their parameters hold
        self._targets = None         # where _retarget writes them (see _keep_fast)
        # (8-byte word in EpiArgs, index in out_ptrs) of every field holding an output pointer
        # (pointer fields are 8-byte ones, and those come first: codegen/epilogue.arg_layout)
        fields = [(pos, i) for i, pos in enumerate(out_pos)] + [(dst, out_pos.index(src)) for dst, src in aliases]
        self._ptr_fields = tuple((k.offsets[pos] // 8, i) for pos, i in fields)
        # the reduction workspace or split-K buffers are the compiled kernel's, shared by its calls
        self._shared_ws = bool(k.program.reductions) or k.spec.split_k > 1

    def fire(self, out_ptrs, side="cupy"):
        """out_ptrs: the plain outputs' pointers, then the reduction outputs' (a list). Launches
        on the caller's current stream (torch's for torch tensors, else CuPy's); one call at a
        time per compiled kernel, and the reduction workspace ordered across streams (gpu.streams)."""
        self.fire_on(out_ptrs, streams.current_stream(stream_side(side)))

    def fire_on(self, out_ptrs, stream):
        """fire on the stream handle `stream` (a repeated call keeps its side's stream query,
        streams.stream_getter(stream_side(side)), and pays only for the query)."""
        order, shared_ws = self.k.order, self._shared_ws
        with order.lock:
            if shared_ws:
                order.before(stream)
            self._fire(out_ptrs, stream)
            if shared_ws:
                order.after(stream)

    def _fire(self, out_ptrs, stream):
        fast = self._fast
        if fast is not None:
            if out_ptrs != self._last:
                self._retarget(out_ptrs)
            for launch in fast:
                fast_launch.launch(launch, stream)
            return
        self._fire_cupy(out_ptrs, stream)

    def _retarget(self, out_ptrs):
        """Writes new output pointers into the fast launches' own parameters."""
        words, maps = self._targets
        for w in words:
            for index, i in self._ptr_fields:
                w[index] = out_ptrs[i]
        for view, o, dt, dims, strides, box in maps:
            view[:] = map_bytes(out_ptrs[o], dt, dims, strides, box)
        self._last = list(out_ptrs)

    def _keep_fast(self, plan, out_ptrs, main):
        """The ctypes launches of `plan` (just run through CuPy) and where _retarget writes in
        their parameter copies: each kernel's EpiArgs (its first parameter) as 8-byte words, and
        the TMA-stored outputs' maps (evt_main's parameters after its args, A and B maps)."""
        self._fast = fast_launch.build(plan)
        if self._fast is None:
            return
        self._last = list(out_ptrs)
        words = [(ctypes.c_uint64 * (L.keep[0].nbytes // 8)).from_buffer(L.keep[0]) for L in self._fast]
        maps = []
        if self.maps is not None:
            keep = self._fast[main].keep
            maps = [(memoryview(keep[3 + j]).cast("B"), *t) for j, t in enumerate(self.maps[2])]
        self._targets = (words, maps)

    def _fire_cupy(self, out_ptrs, stream):
        k = self.k
        vals = self.vals.copy()
        for pos, ptr in zip(self.out_pos, out_ptrs):
            vals[pos] = ptr
        for dst, src in self.aliases:
            vals[dst] = vals[src]
        args = np.frombuffer(k.layout.pack(*vals), np.uint8).copy().view(k.args_dtype)
        has_reds = bool(k.program.reductions)
        plan = []       # (CuPy RawKernel, grid, block, shared bytes, params) as launched
        if has_reds and not k.spec.deterministic:
            plan.append((k.init, k._small_grid(self.max_elems), 256, 0, (args,)))
        if self.maps is not None:
            ta, tb, tds, txs, units, extra = self.maps
            dmaps = [tensor_map(out_ptrs[o], dt, dims, strides, box) for o, dt, dims, strides, box in tds]
            plan.append((k.main, min(units, k.num_sms), k.threads, k.smem,
                         (args, ta, tb, *(dmaps or [dummy_map()]), *txs, *extra)))
        else:
            plan.append((k.main, self.tiles, k.threads, k.smem, (args,)))
        if has_reds and len(k.spec.direct_reds) < len(k.program.reductions):
            plan.append((k.finish, k._small_grid(self.max_elems), 256, 0, (args,)))
        import cupy as cp
        cp_stream = cp.cuda.ExternalStream(stream) if stream else cp.cuda.Stream.null
        for fn, grid, block, smem, params in plan:
            fn((grid,), (block,), params, shared_mem=smem, stream=cp_stream)
        if fast_launch.enabled():
            self._keep_fast(plan, out_ptrs, int(has_reds and not k.spec.deterministic))
