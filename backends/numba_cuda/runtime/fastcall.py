"""The repeated-call path for torch and CuPy arrays: one launch prepared per call signature.

The first call with a signature goes through bind (every check), picks the variant and
launches; a `FastCall` then keeps what that call decided: the kernel-parameter values with
the positions of every pointer and scalar, the output allocators, the launch arguments and the
workspaces. A later call whose key matches refills the pointers and scalars, allocates the
outputs and launches, with no binding, no array views and no dtype-name lookups (which cost
tens of microseconds per call in Python).

Invariant: the key (evt_core.call.fast_signature's) holds everything bind's checks, the
variant choice and the parameter values depend on except pointers and scalar values (shapes,
strides, dtypes, devices, 16-byte alignment, the keyword names in order, which are scalars),
so a matching call would bind to the same values. fast_signature admits only CUDA torch
tensors, CuPy arrays and Python floats that normalize_call passes unchanged; scalars of other
types, NumPy inputs and anything unusual get None from it, and the call takes the full path.

Invariant: a FastCall is stored under the key of the call that recorded it, and a key fixes
the input names in call order, so the values fast_signature returns for a matching call line
up with `arg_pos` (A's pointer, B's, then each input's parameter slot).
"""
import functools
import math
import operator

from evt_core.call import poison_requested

from ...gpu import streams
from . import driver

_BASE = 12        # parameter slots: pA, pB, L, M, N, K, six A/B strides, then 4 per input


class FastCall:
    """What one fully checked call decided, replayed for calls with the same key."""

    def __init__(self, runner, side, b, values, fns, grid, block, ws, names, like, finish=None, maps=None,
                 ws_at=None, ordered=None):
        """values: the main kernel's parameter values; names: the call's input names in call
        order; like: A (the device outputs go to); finish: (function, values, grid, block)
        of the reduction finish kernel, or None; maps: (position of the A map's address in values,
        launch_sm90.ReplayMaps, outputs with a TMA-store map, indices of the inputs with a
        TMA-load map) for the sm_90a kernel, whose tensor maps embed the operands' addresses,
        or None; ws_at: the position of the first workspace's address in values (a direct
        reduction's workspace is its output: rewritten per call); ordered: the call shares
        workspaces with the runner's other calls (reductions, split-K's partials and counters,
        whose addresses stay in values), so it is ordered across streams (default: reductions)."""
        p = runner.p
        self.order, self.side = runner._order, side
        self.stream = streams.stream_getter(side)
        self.capturing = streams.capture_query(side)      # of the stream self.stream() returns
        self.main, self.values = fns["main"], list(values)
        self.head = self.main.head(grid, block)
        nin, nsc = len(p.inputs), len(p.scalars)
        slot = {op.name: _BASE + 4 * k for k, op in enumerate(p.inputs)}
        slot.update({name: _BASE + 4 * nin + j for j, name in enumerate(p.scalars)})
        self.arg_pos = [0, 1] + [slot[n] for n in names]
        out0 = _BASE + 4 * nin + nsc
        self.n_out = len(p.outputs)
        # the main kernel's slots a replay rewrites, in the order run fills them: the
        # arguments, the outputs, the maps (everything else is the recorded call's)
        self.changed = self.arg_pos + [out0 + 4 * k for k in range(self.n_out)]
        self.maps = None
        if maps is not None:
            pos, self.maps, self.n_stored, ring_ks = maps    # n_stored: all outputs or none
            # the TMA-loaded (M, N) inputs' addresses: their places in run's `values`
            self.ring_at = [2 + names.index(p.inputs[k].name) for k in ring_ks]
            self.changed += range(pos, pos + 2 + len(self.maps.geo))
        # direct reductions (runner.direct_reduction): their outputs are the workspaces the
        # kernel's atomics go into, new per call; their slots are rewritten last
        self.direct = [k for k, w in enumerate(ws) if w["direct"]]
        self.changed += [ws_at + 3 * k for k in self.direct]
        self.ordered = bool(p.reductions) if ordered is None else ordered
        self.finish = None
        if finish is not None:
            # finish kernel: L, M, N, then per reduction ws, pl, pm, pn, wm, wn, red ptr, 3 strides
            self.finish, fv, fgrid, fblock = finish
            self.finish_values = list(fv)
            self.finish_head = self.finish.head(fgrid, fblock)
            self.red_pos = [3 + 10 * k + 6 for k in range(len(p.reductions))]
        device = like.device if side == "torch" else None
        self.alloc = [_maker(side, _alloc_spec(t.array), device) for t in b.outputs + b.reductions]
        self.ptr = operator.methodcaller("data_ptr") if side == "torch" else _cupy_ptr
        self.fill = operator.methodcaller("fill_" if side == "torch" else "fill", math.nan)
        self.ws = ws                                   # keeps the workspace buffers alive
        # (workspace buffer, or None for a direct reduction's output, bits, elements, reduction)
        self.memsets = [(w["buf"], w["bits"], w["n"], k) for k, w in enumerate(ws) if w.get("bits") is not None]
        every = [op.name for op in p.outputs] + [r.name for r in p.reductions]
        self.result_index = [(n, every.index(n)) for n in p.result_names]

    def run(self, values):
        """values: fast_signature's for a call with this key (a fresh list: run extends it).
        None: the full path decides (an unaligned TMA-stored output, or a capture with no free
        map slot)."""
        stream = self.stream()
        made = [new() for new in self.alloc]           # outputs, then reduction outputs
        if poison_requested():
            for x in made:
                self.fill(x)
        ptrs = list(map(self.ptr, made))
        outs = ptrs[:self.n_out]
        values += outs
        if self.maps is not None:
            stored = outs[:self.n_stored]
            for i in self.ring_at:
                stored.append(values[i])
            for q in stored:        # (a loop: a generator costs a frame per call)
                if q & 15:
                    return None     # a TMA-mapped output or input needs a 16-byte aligned base: the full path decides
            maps = self.maps.pointers(values[0], values[1], tuple(stored), stream, self.capturing(stream))
            if maps is None:
                return None
            values += maps
        reds = ptrs[self.n_out:]
        for k in self.direct:
            values.append(reds[k])
        if self.ordered:
            self.order.before(stream)
        for buf, bits, n, k in self.memsets:
            driver.memset32(reds[k] if buf is None else buf.ptr, bits, n, stream)
        self.main.replay(self.head, self.values, self.changed, values, stream, self)
        if self.finish is not None:
            self.finish.replay(self.finish_head, self.finish_values, self.red_pos, reds, stream, self)
        if self.ordered:
            self.order.after(stream)
        return {n: made[i] for n, i in self.result_index}


def _alloc_spec(view):
    """(shape, element strides, dtype object) of an output as bind allocated it (a DevView)."""
    item = view.dtype.itemsize
    return tuple(view.shape), tuple(s // item for s in view.strides), view.owner.dtype


def _maker(side, spec, device):
    """A function of no arguments allocating an output like `spec` (torch: on `device`, the
    recorded call's A's, which the key fixes)."""
    shape, strides, dtype = spec
    if side == "torch":
        import torch
        return functools.partial(torch.empty_strided, shape, strides, dtype=dtype, device=device)
    return functools.partial(_cupy_empty, shape, strides, dtype)


def _cupy_empty(shape, strides, dtype):
    import cupy
    item = dtype.itemsize
    nbytes = (1 + sum((e - 1) * s for e, s in zip(shape, strides))) * item if all(shape) else item
    return cupy.ndarray(shape, dtype, memptr=cupy.cuda.alloc(nbytes), strides=tuple(s * item for s in strides))


def _cupy_ptr(x):
    return x.data.ptr
