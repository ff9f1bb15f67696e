"""sm_90a device intrinsics (inline PTX) for the warp-specialised kernel of mainloop_sm90.py:
mbarriers with a bounded wait, TMA loads from tensor maps in global memory, wgmma with its
fence/commit/wait, setmaxnreg, named barriers and 32-bit index arithmetic.

Conventions: every address and index argument is an int64 in the generated Python (numba
widens mixed integer arithmetic to int64 anyway); the intrinsics truncate shared-window
addresses to the 32 bits the instructions take. Accumulators are UniTuple(float32, N): the
wgmma, its fence and its waits carry the whole tuple as tied operands, so no accumulator read
or write can move across them (numba-hopper-notes "Recipes").
"""
from llvmlite import ir
from numba import types
from numba.cuda.extending import intrinsic

from ...gpu.sm90 import CONSUMER_REGS, DESC_SWIZZLE_128B, PRODUCER_REGS

_F32, _I32, _I64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
_VOID = ir.VoidType()
i64 = types.int64

# A wait longer than this (ns of %globaltimer) is a broken pipeline, never a slow one: a tile's
# epilogue takes microseconds. The watchdog then records `code` and traps (see mbar_wait).
WATCHDOG_NS = 10_000_000_000


def _asm(builder, ret, text, constraints, args, side_effect=True):
    fnty = ir.FunctionType(ret, [a.type for a in args])
    return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=side_effect), args)


def _u32(builder, v):
    return builder.trunc(v, _I32)


def _void_intrinsic(text, constraints, nargs, narrow):
    """An intrinsic of `nargs` int64 arguments emitting `text`; arguments whose index is in
    `narrow` are truncated to 32 bits (shared-window addresses, counts, coordinates)."""
    def typer(typingctx, *args):
        def codegen(context, builder, sig, values):
            vals = [_u32(builder, v) if k in narrow else v for k, v in enumerate(values)]
            _asm(builder, _VOID, text, constraints, vals)
        return types.void(*([i64] * nargs)), codegen
    # numba's intrinsic decorator needs a fixed arity (no *args in the lowered call)
    return intrinsic(_FIXED_ARITY[nargs](typer))


_FIXED_ARITY = {
    0: lambda f: lambda typingctx: f(typingctx),
    1: lambda f: lambda typingctx, a: f(typingctx, a),
    2: lambda f: lambda typingctx, a, b: f(typingctx, a, b),
    3: lambda f: lambda typingctx, a, b, c: f(typingctx, a, b, c),
    4: lambda f: lambda typingctx, a, b, c, d: f(typingctx, a, b, c, d),
    5: lambda f: lambda typingctx, a, b, c, d, e: f(typingctx, a, b, c, d, e),
    6: lambda f: lambda typingctx, a, b, c, d, e, g: f(typingctx, a, b, c, d, e, g),
}


# ---- mbarriers (shared::cta) -------------------------------------------------------------------

mbar_init = _void_intrinsic("mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", 2, {0, 1})
mbar_expect_tx = _void_intrinsic("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", 2,
                                 {0, 1})
mbar_arrive = _void_intrinsic("mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", 1, {0})
# after init: make the barriers visible to the async proxy (TMA) before any thread uses them
fence_barrier_init = _void_intrinsic("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;",
                                     "~{memory}", 0, set())

# Bounded wait on phase `parity`: the fast path is one try_wait; after that the loop reads
# %globaltimer and gives up after WATCHDOG_NS: it stores `code` to the host-mapped word at
# `flag` (so the host can say which wait failed after the context is lost), fences to system
# scope and traps, which ends the kernel with a launch error instead of hanging the GPU.
# Labels inside braces are local to the block, so the asm can be inlined many times. The
# branches are .uni as in CUTLASS's ClusterBarrier::wait: the phase completes for every waiting
# thread at once, and the wgmma.*.sync.aligned instructions after the wait need the warp converged.
_WAIT = f"""{{
\t.reg .pred P1;
\t.reg .u64 T0, T1;
\tmbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;
\t@P1 bra.uni DONE;
\tmov.u64 T0, %globaltimer;
\tLOOP:
\tmbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;
\t@P1 bra.uni DONE;
\tmov.u64 T1, %globaltimer;
\tsub.u64 T1, T1, T0;
\tsetp.lt.u64 P1, T1, {WATCHDOG_NS};
\t@P1 bra.uni LOOP;
\tst.volatile.global.u32 [$2], $3;
\tmembar.sys;
\ttrap;
\tDONE:
\t}}"""
mbar_wait = _void_intrinsic(_WAIT, "r,r,l,r,~{memory}", 4, {0, 1, 3})


# ---- TMA ---------------------------------------------------------------------------------------

# The map is a 128-byte tensor map in global memory (generic address); x is the innermost
# coordinate. Completion is signalled on the mbarrier as transaction bytes.
tma_load_2d = _void_intrinsic(
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];",
    "r,l,r,r,r,~{memory}", 5, {0, 2, 3, 4})
tma_load_3d = _void_intrinsic(
    "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], [$5];",
    "r,l,r,r,r,r,~{memory}", 6, {0, 2, 3, 4, 5})
# A map written by the host into global memory must be acquired by the tensormap proxy once
# per CTA before its first use (CUDA Programming Guide, "tensor map in global memory").
tensormap_acquire = _void_intrinsic("fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", "l,~{memory}", 1,
                                    set())


# ---- TMA stores of staged outputs (the fragment epilogue, epilogue_fragment.py) -----------------

# Shared -> global through the output's map; the box's part past the tensor's edges is not
# written. Completion is tracked per thread by bulk groups (commit, then wait).
tma_store_2d = _void_intrinsic("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$2, $3}], [$1];",
                               "l,r,r,r,~{memory}", 4, {1, 2, 3})
tma_store_3d = _void_intrinsic("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [$0, {$2, $3, $4}], [$1];",
                               "l,r,r,r,r,~{memory}", 5, {1, 2, 3, 4})
bulk_commit = _void_intrinsic("cp.async.bulk.commit_group;", "~{memory}", 0, set())
# .read: the stores have read shared memory (the staging may be rewritten); plain: they are done
bulk_wait_read0 = _void_intrinsic("cp.async.bulk.wait_group.read 0;", "~{memory}", 0, set())
bulk_wait0 = _void_intrinsic("cp.async.bulk.wait_group 0;", "~{memory}", 0, set())
# every writing thread, before the barrier that hands the staging to the TMA (async proxy)
fence_proxy_async = _void_intrinsic("fence.proxy.async.shared::cta;", "~{memory}", 0, set())


def _sts_pair(cvt):
    @intrinsic
    def sts_pair(typingctx, addr, lo, hi):
        """Round two fp32 values to one packed 16-bit pair (lo at the lower address) and store
        the 32 bits at shared address `addr`: one instruction per two output elements. The
        conversion is pure asm and the store a plain LLVM store to addrspace(3), so the
        compiler may move global and other shared loads across it (an asm store with a memory
        clobber serialised every column group's input loads behind the previous group's stores)."""
        def codegen(context, builder, sig, args):
            # cvt.rn.{f16x2,bf16x2}.f32 d, a, b puts a in the upper half
            bits = _asm(builder, _I32, f"{cvt} $0, $2, $1;", "=r,f,f", [args[1], args[2]], side_effect=False)
            ptr = builder.inttoptr(builder.zext(_u32(builder, args[0]), _I64), ir.PointerType(_I32, 3))
            builder.store(bits, ptr)
        return types.void(i64, types.float32, types.float32), codegen
    return sts_pair


sts_pair_f16, sts_pair_bf16 = _sts_pair("cvt.rn.f16x2.f32"), _sts_pair("cvt.rn.bf16x2.f32")


def _widen_pair(context, builder, sig, bits, bf16):
    """A packed 16-bit pair (lower half first) as a tuple of two fp32 values: bf16 by shifts,
    fp16 by fpext (cvt.f32.f16)."""
    hi_bits = builder.lshr(bits, ir.Constant(_I32, 16))
    if bf16:
        vals = [builder.bitcast(builder.shl(bits, ir.Constant(_I32, 16)), _F32),
                builder.bitcast(builder.shl(hi_bits, ir.Constant(_I32, 16)), _F32)]
    else:
        half, i16 = ir.HalfType(), ir.IntType(16)
        vals = [builder.fpext(builder.bitcast(builder.trunc(v, i16), half), _F32) for v in (bits, hi_bits)]
    return context.make_tuple(builder, sig.return_type, vals)


def _lds_pair(bf16):
    @intrinsic
    def lds_pair(typingctx, addr):
        """The packed 16-bit pair at 4-byte aligned shared address `addr` (the lower address's
        element first) widened to two fp32 values: one 32-bit load for a fragment pair's two
        columns of a TMA-loaded (M, N) input panel. A plain LLVM load from addrspace(3), like
        sts_pair's store."""
        def codegen(context, builder, sig, args):
            ptr = builder.inttoptr(builder.zext(_u32(builder, args[0]), _I64), ir.PointerType(_I32, 3))
            return _widen_pair(context, builder, sig, builder.load(ptr, align=4), bf16)
        return types.UniTuple(types.float32, 2)(i64), codegen
    return lds_pair


def _pair_of(bf16):
    @intrinsic
    def pair_of(typingctx, bits):
        """lds_pair's widening alone, of a word lds_u32 read earlier (consumer_overlap reads a
        tile's input panels whole at its epilogue's start, so their ring slots go back early)."""
        def codegen(context, builder, sig, args):
            return _widen_pair(context, builder, sig, args[0], bf16)
        return types.UniTuple(types.float32, 2)(types.uint32), codegen
    return pair_of


@intrinsic
def lds_u32(typingctx, addr):
    """The 32-bit word at 4-byte aligned shared address `addr` (a plain LLVM load from addrspace(3))."""
    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(builder.zext(_u32(builder, args[0]), _I64), ir.PointerType(_I32, 3))
        return builder.load(ptr, align=4)
    return types.uint32(i64), codegen


pair_of_f16, pair_of_bf16 = _pair_of(False), _pair_of(True)
lds_pair_f16, lds_pair_bf16 = _lds_pair(False), _lds_pair(True)


@intrinsic
def lds_f32x2(typingctx, addr):
    """The two fp32 words at 8-byte aligned shared address `addr` in one 64-bit load (a fragment
    pair's two adjacent columns of a staged column vector). A plain LLVM load from addrspace(3),
    like sts_pair's store, so it schedules freely between barriers."""
    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(builder.zext(_u32(builder, args[0]), _I64), ir.PointerType(ir.VectorType(_F32, 2), 3))
        v = builder.load(ptr, align=8)
        return context.make_tuple(builder, sig.return_type,
                                  [builder.extract_element(v, ir.Constant(_I32, e)) for e in range(2)])
    return types.UniTuple(types.float32, 2)(i64), codegen


def _mufu(text):
    @intrinsic
    def fn(typingctx, x):
        def codegen(context, builder, sig, args):
            return _asm(builder, _F32, text, "=f,f", list(args), side_effect=False)
        return types.float32(types.float32), codegen
    return fn


# fast_math="auto" spellings (spelling.FAST_SPELLING): one MUFU instruction each; pure, so CSE-able
tanh_approx = _mufu("tanh.approx.f32 $0, $1;")
rcp_approx = _mufu("rcp.approx.ftz.f32 $0, $1;")
exp_approx = _mufu("{ .reg .f32 t; mul.f32 t, $1, 0f3FB8AA3B; ex2.approx.ftz.f32 $0, t; }")   # 2^(x log2 e)
ex2_approx = _mufu("ex2.approx.ftz.f32 $0, $1;")                                            # 2^x (fast GELU)
log_approx = _mufu("{ .reg .f32 t; lg2.approx.ftz.f32 t, $1; mul.f32 $0, t, 0f3F317218; }")   # log2(x) ln 2


@intrinsic
def max_nan(typingctx, a, b):
    """max(a, b), NaN if either is (devicefns.nan_max's contract) in one instruction. An
    intrinsic, not a device function: numba inlines those at its IR level per call site, which
    cost the fragment epilogue's kernel tens of seconds of build for its column combines."""
    def codegen(context, builder, sig, args):
        return _asm(builder, _F32, "max.NaN.f32 $0, $1, $2;", "=f,f,f", list(args), side_effect=False)
    return types.float32(types.float32, types.float32), codegen

# ---- warp specialisation -----------------------------------------------------------------------

setmaxnreg_producer = _void_intrinsic(f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGS};", "~{memory}", 0, set())
setmaxnreg_consumer = _void_intrinsic(f"setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGS};", "~{memory}", 0, set())
# bar.sync with an id other than 0 (__syncthreads' barrier) over `count` threads: one consumer
# warpgroup synchronises without the other two warpgroups.
named_bar_sync = _void_intrinsic("bar.sync $0, $1;", "r,r,~{memory}", 2, {0, 1})
# bar.arrive: count towards barrier $0 without waiting (the ping-pong hand-over: the warpgroup
# that is done signals the one waiting in bar.sync on the same id and count).
named_bar_arrive = _void_intrinsic("bar.arrive $0, $1;", "r,r,~{memory}", 2, {0, 1})


@intrinsic
def per_tile(typingctx, v):
    """`v` (a 32-bit value) through a volatile move, so LLVM sees a new value each time this
    runs: what is derived from it (the epilogue's 64-128 shared-memory addresses) is computed
    in the tile loop instead of hoisted out of it and kept live across the mainloop, beside
    the accumulators, where it spilled (ping-pong W1: 39 STL, 43 LDL)."""
    def codegen(context, builder, sig, args):
        return builder.zext(_asm(builder, _I32, "mov.b32 $0, $1;", "=r,r", [_u32(builder, args[0])]), _I64)
    return i64(i64), codegen


@intrinsic
def warp_uniform(typingctx, v):
    """`v` (equal across the warp) broadcast from lane 0 with shfl.sync, so ptxas can keep it and
    everything derived from it on the uniform datapath (CUTLASS does the same for the warpgroup
    index: otherwise descriptor arithmetic lands in vector registers)."""
    def codegen(context, builder, sig, args):
        r = _asm(builder, _I32, "shfl.sync.idx.b32 $0, $1, 0, 0x1f, 0xffffffff;", "=r,r", [_u32(builder, args[0])])
        return builder.zext(r, _I64)
    return i64(i64), codegen


def _u32_binop(op):
    @intrinsic
    def fn(typingctx, a, b):
        """32-bit unsigned a op b for non-negative int64 operands below 2^32: numba's int64
        division by a run-time value compiles to a CALL of __cuda_sm20_div_s64."""
        def codegen(context, builder, sig, args):
            x, y = _u32(builder, args[0]), _u32(builder, args[1])
            return builder.zext(getattr(builder, op)(x, y), _I64)
        return i64(i64, i64), codegen
    return fn


udiv32, urem32 = _u32_binop("udiv"), _u32_binop("urem")


@intrinsic
def smem_align1024(typingctx, arr):
    """The shared-window address of a dynamic `cuda.shared.array(0, uint8)` rounded up to the
    1024-byte swizzle atom (the launch asks for 1 KB of slack)."""
    def codegen(context, builder, sig, args):
        from numba.core import cgutils
        data = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0]).data
        generic = builder.ptrtoint(data, _I64)
        r = _asm(builder, _I32, "{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; "
                 "add.u32 $0, $0, 1023; and.b32 $0, $0, 0xfffffc00; }", "=r,l", [generic], side_effect=False)
        return builder.zext(r, _I64)
    return i64(arr), codegen


# ---- wgmma -------------------------------------------------------------------------------------

@intrinsic
def wgmma_desc(typingctx, addr, lbo, sbo):
    """The 64-bit shared-memory matrix descriptor (128-byte swizzle) of a tile at shared address
    `addr` (backends/gpu/sm90.py gives the field layout)."""
    def codegen(context, builder, sig, args):
        def enc(v):
            return builder.lshr(builder.and_(v, ir.Constant(_I64, 0x3FFFF)), ir.Constant(_I64, 4))
        d = builder.or_(enc(args[0]), builder.shl(enc(args[1]), ir.Constant(_I64, 16)))
        d = builder.or_(d, builder.shl(enc(args[2]), ir.Constant(_I64, 32)))
        return builder.or_(d, ir.Constant(_I64, DESC_SWIZZLE_128B))
    return i64(i64, i64, i64), codegen


def _tied(n, text):
    """An intrinsic acc -> acc whose asm `text` carries the n accumulators as tied operands."""
    @intrinsic
    def fn(typingctx, acc):
        def codegen(context, builder, sig, args):
            vals = [builder.extract_value(args[0], i) for i in range(n)]
            st = ir.LiteralStructType([_F32] * n)
            cons = ",".join(["=f"] * n + [str(i) for i in range(n)] + ["~{memory}"])
            r = _asm(builder, st, text, cons, vals)
            return context.make_tuple(builder, sig.return_type, [builder.extract_value(r, i) for i in range(n)])
        tup = types.UniTuple(types.float32, n)
        return tup(tup), codegen
    return fn


def undef_accumulators(n_acc):
    """An intrinsic () -> UniTuple(float32, n_acc) of undefined values: a tile's accumulators
    before its first wgmma, which overwrites them (scale_d 0), so nothing has to zero them."""
    tup = types.UniTuple(types.float32, n_acc)

    @intrinsic
    def undef(typingctx):
        def codegen(context, builder, sig, args):
            return context.get_constant_undef(sig.return_type)
        return tup(), codegen
    return undef


def accumulator_tie(n_acc):
    """An intrinsic acc -> acc emitting no instruction: it ties a second fragment's accumulators
    in place next to the one fence or wait that serves the whole warpgroup (a wgmma.fence or
    wait_group orders every register of the warpgroup, so ping-pong's two fragments need one)."""
    return _tied(n_acc, "")


def wgmma_ops(n_acc, ab, b_kmajor, a_kmajor=True):
    """(fence, mma, commit, wait1, wait0) for m64n(2 n_acc)k16 with fp32 accumulate: mma(acc,
    desc_a, desc_b, scale_d) -> acc, A K-major or M-major (imm-trans-a 1), B K-major or N-major
    (imm-trans-b 1). scale_d == 0 writes A·B over whatever acc holds (the tile's first k16 step:
    no zeroed accumulators, so none of the 64-128 register moves before the first wgmma);
    otherwise it accumulates. bind refuses K == 0, so every tile has a first step."""
    bn = 2 * n_acc
    regs = ",".join(f"${i}" for i in range(n_acc))
    text = (f"{{ .reg .pred p; setp.ne.b32 p, ${n_acc + 2}, 0; "
            f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{ab}.{ab} {{{regs}}}, ${n_acc}, ${n_acc + 1}, p, 1, 1, "
            f"{0 if a_kmajor else 1}, {0 if b_kmajor else 1}; }}")
    tup = types.UniTuple(types.float32, n_acc)

    @intrinsic
    def mma(typingctx, acc, da, db, scale_d):
        def codegen(context, builder, sig, args):
            vals = [builder.extract_value(args[0], i) for i in range(n_acc)]
            st = ir.LiteralStructType([_F32] * n_acc)
            cons = ",".join(["=f"] * n_acc + ["l", "l", "r"] + [str(i) for i in range(n_acc)] + ["~{memory}"])
            r = _asm(builder, st, text, cons, [args[1], args[2], _u32(builder, args[3])] + vals)
            return context.make_tuple(builder, sig.return_type, [builder.extract_value(r, i) for i in range(n_acc)])
        return tup(tup, i64, i64, i64), codegen

    fence = _tied(n_acc, "wgmma.fence.sync.aligned;")
    wait1 = _tied(n_acc, "wgmma.wait_group.sync.aligned 1;")
    wait0 = _tied(n_acc, "wgmma.wait_group.sync.aligned 0;")
    commit = _void_intrinsic("wgmma.commit_group.sync.aligned;", "~{memory}", 0, set())
    return fence, mma, commit, wait1, wait0


# ---- serial split-K (codegen/splitk.py) ----------------------------------------------------------
# A warpgroup's partials: accumulator i of thread tid at float (i * 128 + tid) of its slot, so
# each register's 128 stores are one coalesced 512-byte row. The intrinsics take the tuple's
# length from its type (64 or 128 accumulators).

@intrinsic
def sk_store(typingctx, acc, addr):
    """Store the accumulators to global memory at addr + 512 i (thread's own column)."""
    n = acc.count

    def codegen(context, builder, sig, args):
        text = " ".join(f"st.global.f32 [$0+{512 * i}], ${i + 1};" for i in range(n))
        _asm(builder, _VOID, text, ",".join(["l"] + ["f"] * n + ["~{memory}"]),
             [args[1]] + [builder.extract_value(args[0], i) for i in range(n)])
    return types.void(acc, i64), codegen


@intrinsic
def sk_add(typingctx, acc, addr):
    """acc + the partials at addr + 512 i, read through L2 (ld.global.cg: another SM wrote them,
    an L1 line could be stale), added in register order. Volatile, so it stays after the fence
    that precedes it."""
    n = acc.count

    def codegen(context, builder, sig, args):
        text = (f"{{ .reg .f32 t<{n}>; "
                + " ".join(f"ld.global.cg.f32 t{i}, [${n}+{512 * i}];" for i in range(n)) + " "
                + " ".join(f"add.rn.f32 ${i}, ${i}, t{i};" for i in range(n)) + " }")
        st = ir.LiteralStructType([_F32] * n)
        cons = ",".join(["=f"] * n + ["l"] + [str(i) for i in range(n)] + ["~{memory}"])
        r = _asm(builder, st, text, cons, [args[1]] + [builder.extract_value(args[0], i) for i in range(n)])
        return context.make_tuple(builder, sig.return_type, [builder.extract_value(r, i) for i in range(n)])
    return acc(acc, i64), codegen


@intrinsic
def sk_zero(typingctx, acc):
    """A tuple of acc's type holding 0.0 (the start of the fix-up's sum)."""
    def codegen(context, builder, sig, args):
        return context.make_tuple(builder, sig.return_type, [ir.Constant(_F32, 0.0)] * acc.count)
    return acc(acc), codegen


# The split's arrival at its (tile, warpgroup) counter, and whether it is the last: thread tid 0
# increments the counter with atom.inc, which wraps to 0 at `last` (ns - 1), so the last arrival
# sees `last` and leaves the counter at 0 for the next launch; barrier.red.or hands its answer to
# the warpgroup's 128 threads (named barrier `bar`). Returns 1 (last) or 0 to every thread.
_ARRIVE = """{
\t.reg .pred p, q;
\t.reg .u32 old;
\tsetp.eq.u32 q, $2, 0;
\tmov.u32 old, 0xffffffff;
\t@q atom.global.inc.u32 old, [$1], $3;
\tsetp.eq.u32 p, old, $3;
\tbarrier.red.or.pred p, $4, 128, p;
\tselp.u32 $0, 1, 0, p;
\t}"""


@intrinsic
def sk_arrive(typingctx, counter, tid, last, bar):
    def codegen(context, builder, sig, args):
        vals = [args[0]] + [_u32(builder, v) for v in args[1:]]
        return builder.zext(_asm(builder, _I32, _ARRIVE, "=r,l,r,r,r,~{memory}", vals), _I64)
    return i64(i64, i64, i64, i64), codegen
