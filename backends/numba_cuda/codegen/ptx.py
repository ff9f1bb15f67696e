"""Device intrinsics for the GPU build: raw-pointer loads/stores, reductions into global
memory, shared-memory addressing and the tensor-core instructions numba-cuda has no API for.

Every kernel argument on the GPU is a scalar (pointers travel as int64), so the compiled cubin
can be launched by a thin ctypes call with no array marshalling. The simulator build replaces
this module with `runtime/simulator.py`, whose functions have the same names and meaning on NumPy
arrays; generated kernels call only these names, so one source serves both.
"""
from llvmlite import ir
from numba import cuda, types
from numba.core import cgutils
from numba.cuda.extending import intrinsic

_F32, _F16, _I16, _I32, _I64 = ir.FloatType(), ir.HalfType(), ir.IntType(16), ir.IntType(32), ir.IntType(64)


def _asm(builder, ret, text, constraints, args, side_effect=True):
    fnty = ir.FunctionType(ret, [a.type for a in args])
    return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=side_effect), args)


def _global_ptr(builder, base, off, elem, size):
    """base + off * size as a global-space pointer (so loads compile to ld.global)."""
    addr = builder.add(base, builder.mul(off, ir.Constant(_I64, size)))
    return builder.inttoptr(addr, ir.PointerType(elem, 1))


def _shared_ptr(builder, base32, idx, elem, size):
    """A shared-window byte address (u32) plus idx elements, as an addrspace(3) pointer: LLVM
    then treats the barrier as ordering these accesses and may schedule them freely otherwise."""
    # 32-bit math (the shared window is far below 4 GiB): no 64-bit adds or multiplies.
    addr = builder.add(base32, builder.mul(builder.trunc(idx, _I32), ir.Constant(_I32, size)))
    return builder.inttoptr(builder.zext(addr, _I64), ir.PointerType(elem, 3))


# ---- global memory: (pointer int64, element offset int64) --------------------------------------

def _bf16_to_f32(builder, bits):
    # bf16 is the top half of an fp32: widen the 16 bits and shift them into place (exact).
    return builder.bitcast(builder.shl(builder.zext(bits, _I32), ir.Constant(_I32, 16)), _F32)


def _loaders(pointer, base_type):
    """(f32, f16, bf16) loads widened to fp32, at `pointer(builder, base, index, elem, size)`:
    global memory (int64 address, element offset) or shared memory (u32 window address, index)."""
    def make(elem, size, widen):
        @intrinsic
        def load(typingctx, base, idx):
            def codegen(context, builder, sig, args):
                return widen(builder, builder.load(pointer(builder, args[0], args[1], elem, size)))
            return types.float32(base_type, types.int64), codegen
        return load
    return (make(_F32, 4, lambda b, v: v), make(_F16, 2, lambda b, v: b.fpext(v, _F32)),
            make(_I16, 2, _bf16_to_f32))


ld_f32, ld_f16, ld_bf16 = _loaders(_global_ptr, types.int64)


@intrinsic
def st_f32(typingctx, p, off, v):
    def codegen(context, builder, sig, args):
        builder.store(args[2], _global_ptr(builder, args[0], args[1], _F32, 4))
    return types.void(types.int64, types.int64, types.float32), codegen


@intrinsic
def st_f16(typingctx, p, off, v):
    # fptrunc lowers to cvt.rn.f16.f32: round to nearest even, as the contract asks.
    def codegen(context, builder, sig, args):
        builder.store(builder.fptrunc(args[2], _F16), _global_ptr(builder, args[0], args[1], _F16, 2))
    return types.void(types.int64, types.int64, types.float32), codegen


@intrinsic
def st_bf16(typingctx, p, off, v):
    def codegen(context, builder, sig, args):
        h = _asm(builder, _I16, "cvt.rn.bf16.f32 $0, $1;", "=h,f", [args[2]], side_effect=False)
        builder.store(h, _global_ptr(builder, args[0], args[1], _I16, 2))
    return types.void(types.int64, types.int64, types.float32), codegen


# Predicated stores: `ok` guards the store inside the instruction (@p st.global), so a guarded
# element is straight-line code. A Python `if ok:` around st_* becomes a branch per element in
# the SASS, and the compiler sinks the element's loads into it, serialising their latencies.
def _store_if(ptx_type, reg, convert):
    text = f"{{ .reg .pred q; setp.ne.b32 q, $2, 0; @q st.global.{ptx_type} [$0], $1; }}"

    @intrinsic
    def st_if(typingctx, p, off, v, ok):
        def codegen(context, builder, sig, args):
            size = 4 if ptx_type == "f32" else 2
            addr = builder.add(args[0], builder.mul(args[1], ir.Constant(_I64, size)))
            _asm(builder, ir.VoidType(), text, f"l,{reg},r,~{{memory}}",
                 [addr, convert(builder, args[2]), builder.zext(args[3], _I32)])
        return types.void(types.int64, types.int64, types.float32, types.boolean), codegen
    return st_if


st_f32_if = _store_if("f32", "f", lambda b, v: v)
st_f16_if = _store_if("b16", "h", lambda b, v: b.bitcast(b.fptrunc(v, _F16), _I16))
st_bf16_if = _store_if("b16", "h", lambda b, v: _asm(b, _I16, "cvt.rn.bf16.f32 $0, $1;", "=h,f", [v],
                                                     side_effect=False))


@intrinsic
def red_add(typingctx, p, off, v):
    """Atomic fp32 add into global memory (no return value: compiles to red.global.add.f32)."""
    def codegen(context, builder, sig, args):
        addr = builder.add(args[0], builder.mul(args[1], ir.Constant(_I64, 4)))
        _asm(builder, ir.VoidType(), "red.global.add.f32 [$0], $1;", "l,f,~{memory}", [addr, args[2]])
    return types.void(types.int64, types.int64, types.float32), codegen


def _red_int(op):
    @intrinsic
    def red(typingctx, p, off, bits):
        def codegen(context, builder, sig, args):
            addr = builder.add(args[0], builder.mul(args[1], ir.Constant(_I64, 4)))
            _asm(builder, ir.VoidType(), f"red.global.{op} [$0], $1;", "l,r,~{memory}", [addr, args[2]])
        return types.void(types.int64, types.int64, types.int32), codegen
    return red


red_max_s32 = _red_int("max.s32")
red_min_u32 = _red_int("min.u32")


@intrinsic
def select_f32(typingctx, c, a, b):
    """a where the integer c is nonzero, else b, as one LLVM select: no branch in numba's IR,
    where a conditional expression is one (56 of them in the column reduce-scatter made its SSA
    and liveness passes the largest share of the kernel's build)."""
    def codegen(context, builder, sig, args):
        return builder.select(builder.icmp_unsigned("!=", args[0], ir.Constant(args[0].type, 0)), args[1], args[2])
    return types.float32(c, types.float32, types.float32), codegen


@intrinsic
def f32_bits(typingctx, v):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], _I32)
    return types.int32(types.float32), codegen


@cuda.jit(device=True, inline=True)
def red_max(p, off, v):
    """NaN-propagating atomic max of fp32 `v` into p[off], by the integer-order trick: a float
    with the sign bit clear orders like its bits as int32 (max), one with the sign bit set in
    reverse as uint32 (min). NaN is canonicalised to +0x7fc00000, which beats every float under
    both orders, so once there it stays (CUDA's fmaxf-based atomics would drop it)."""
    bits = f32_bits(v)
    if v != v:
        bits = 0x7FC00000
    if bits >= 0:
        red_max_s32(p, off, bits)
    else:
        red_min_u32(p, off, bits)


# ---- shared memory: (u32 shared-window address, element index int64) ---------------------------

@intrinsic
def smem_base(typingctx, arr):
    """The u32 shared-window address of a `cuda.shared.array` (for cp.async, ldmatrix, lds/sts)."""
    def codegen(context, builder, sig, args):
        data = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0]).data
        generic = builder.ptrtoint(data, _I64)
        return _asm(builder, _I32, "{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; }",
                    "=r,l", [generic], side_effect=False)
    return types.uint32(arr), codegen


lds, lds_f16, lds_bf16 = _loaders(_shared_ptr, types.uint32)


@intrinsic
def sts(typingctx, base, idx, v):
    def codegen(context, builder, sig, args):
        builder.store(args[2], _shared_ptr(builder, args[0], args[1], _F32, 4))
    return types.void(types.uint32, types.int64, types.float32), codegen


# ---- tensor-core mainloop ----------------------------------------------------------------------

@intrinsic
def cp_async16(typingctx, dst, src, nbytes):
    """Copy 16 bytes global -> shared asynchronously; bytes past `nbytes` are zero-filled, which is
    how edge tiles (M, N or K not a tile multiple) read zeros instead of out-of-bounds memory."""
    def codegen(context, builder, sig, args):
        _asm(builder, ir.VoidType(), "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", args)
    return types.void(types.uint32, types.int64, types.uint32), codegen


@intrinsic
def cp_async_commit(typingctx):
    def codegen(context, builder, sig, args):
        _asm(builder, ir.VoidType(), "cp.async.commit_group;", "~{memory}", [])
    return types.void(), codegen


def _cp_async_wait(n):
    @intrinsic
    def wait(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), f"cp.async.wait_group {n};", "~{memory}", [])
        return types.void(), codegen
    return wait


cp_async_wait_0, cp_async_wait_1, cp_async_wait_2 = (_cp_async_wait(n) for n in range(3))


def _ldmatrix(trans):
    suffix = ".trans" if trans else ""

    @intrinsic
    def ldm(typingctx, addr):
        def codegen(context, builder, sig, args):
            st = ir.LiteralStructType([_I32] * 4)
            r = _asm(builder, st, f"ldmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 {{$0,$1,$2,$3}}, [$4];",
                     "=r,=r,=r,=r,r,~{memory}", args)
            return context.make_tuple(builder, sig.return_type, [builder.extract_value(r, i) for i in range(4)])
        return types.UniTuple(types.uint32, 4)(types.uint32), codegen
    return ldm


ldmatrix_x4, ldmatrix_x4_trans = _ldmatrix(False), _ldmatrix(True)


def _mma(ab):
    text = (f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 "
            "{$0,$1,$2,$3}, {$4,$5,$6,$7}, {$8,$9}, {$10,$11,$12,$13};")

    @intrinsic
    def mma(typingctx, a0, a1, a2, a3, b0, b1, c):
        """c + A(16x16, 4 regs) @ B(16x8, 2 regs); c and the result are 4-float tuples, so one
        generated statement per mma keeps numba's compile time down."""
        def codegen(context, builder, sig, args):
            cin = [builder.extract_value(args[6], i) for i in range(4)]
            st = ir.LiteralStructType([_F32] * 4)
            r = _asm(builder, st, text, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", list(args[:6]) + cin, side_effect=False)
            return context.make_tuple(builder, sig.return_type, [builder.extract_value(r, i) for i in range(4)])
        u, f4 = types.uint32, types.UniTuple(types.float32, 4)
        return f4(u, u, u, u, u, u, f4), codegen
    return mma


mma_f16, mma_bf16 = _mma("f16"), _mma("bf16")


@intrinsic
def sts_frag(typingctx, base, i0, i1, c):
    """Store an mma accumulator fragment (c0, c1 at row g; c2, c3 at row g+8) to shared memory:
    c0, c1 at elements i0, i0+1 and c2, c3 at i1, i1+1."""
    def codegen(context, builder, sig, args):
        for h, idx in enumerate((args[1], args[2])):
            for e in range(2):
                at = builder.add(idx, ir.Constant(_I64, e))     # _shared_ptr narrows it to 32 bits
                builder.store(builder.extract_value(args[3], 2 * h + e), _shared_ptr(builder, args[0], at, _F32, 4))
    return types.void(types.uint32, types.int64, types.int64, types.UniTuple(types.float32, 4)), codegen
