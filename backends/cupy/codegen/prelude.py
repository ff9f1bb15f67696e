"""Device helpers shared by every generated kernel: no headers at all (NVRTC through CuPy ships
no mma.h and the fp16 headers are optional), so fp16/bf16 values travel as `unsigned short` bits
and conversions are PTX `cvt`. Kept as plain text: the generator pastes it once per module.
"""
from .spelling import MATH_HELPERS

TYPES = r"""
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
"""

# dtype name -> (C storage type, load-to-float expr over a pointer expr p, float-to-storage fn)
STORAGE = {
    "float32": "float",
    "float16": "u16",
    "bfloat16": "u16",
}

CONVERT = r"""
// ---- storage <-> fp32 conversions (round to nearest even on the way out) ----
__device__ __forceinline__ float evt_f16_to_f32(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ float evt_bf16_to_f32(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ u16 evt_f32_to_f16(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16 evt_f32_to_bf16(float f) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
// two floats -> one 32-bit word of two halves, lo in the low 16 bits
__device__ __forceinline__ u32 evt_pack_f16x2(float lo, float hi) { u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
__device__ __forceinline__ u32 evt_pack_bf16x2(float lo, float hi) { u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }

// typed loads through the read-only path, typed stores; p is an element pointer
__device__ __forceinline__ float evt_ld_float32(const float* p) { return __ldg(p); }
__device__ __forceinline__ float evt_ld_float16(const u16* p) { return evt_f16_to_f32(__ldg(p)); }
__device__ __forceinline__ float evt_ld_bfloat16(const u16* p) { return evt_bf16_to_f32(__ldg(p)); }
__device__ __forceinline__ void evt_st_float32(float* p, float v) { *p = v; }
__device__ __forceinline__ void evt_st_float16(u16* p, float v) { *p = evt_f32_to_f16(v); }
__device__ __forceinline__ void evt_st_bfloat16(u16* p, float v) { *p = evt_f32_to_bf16(v); }
// pair loads/stores: the caller guarantees p is aligned to the pair (checked on the host)
__device__ __forceinline__ void evt_ld2_float32(const float* p, float& a, float& b) { float2 v = __ldg((const float2*)p); a = v.x; b = v.y; }
__device__ __forceinline__ void evt_ld2_float16(const u16* p, float& a, float& b) { u32 w = __ldg((const unsigned int*)p); a = evt_f16_to_f32((u16)(w & 0xffff)); b = evt_f16_to_f32((u16)(w >> 16)); }
__device__ __forceinline__ void evt_ld2_bfloat16(const u16* p, float& a, float& b) { u32 w = __ldg((const unsigned int*)p); a = __uint_as_float(w << 16); b = __uint_as_float(w & 0xffff0000u); }
// two 16-bit values of one 32-bit word (lo = the lower column) -> floats (aux_tma smem reads)
__device__ __forceinline__ void evt_unpack2_float16(u32 w, float& a, float& b) { a = evt_f16_to_f32((u16)(w & 0xffff)); b = evt_f16_to_f32((u16)(w >> 16)); }
__device__ __forceinline__ void evt_unpack2_bfloat16(u32 w, float& a, float& b) { a = __uint_as_float(w << 16); b = __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ void evt_st2_float32(float* p, float a, float b) { *(float2*)p = make_float2(a, b); }
__device__ __forceinline__ void evt_st2_float16(u16* p, float a, float b) { *(u32*)p = evt_pack_f16x2(a, b); }
__device__ __forceinline__ void evt_st2_bfloat16(u16* p, float a, float b) { *(u32*)p = evt_pack_bf16x2(a, b); }
"""

ATOMICS = r"""
// ---- global combines into the fp32 reduction workspace ----
__device__ __forceinline__ void evt_atomic_sum(float* p, float v) { atomicAdd(p, v); }
// NaN-propagating float max through integer atomics: non-negative floats order like signed ints,
// negative floats order inversely as unsigned ints. A NaN is written as 0x7fffffff, which wins
// every later max in both encodings, so a NaN anywhere reaches the result.
__device__ __forceinline__ void evt_atomic_amax(float* p, float v) {
  if (v != v) { atomicMax((int*)p, 0x7fffffff); return; }
  if (__float_as_int(v) >= 0) atomicMax((int*)p, __float_as_int(v));
  else atomicMin((unsigned int*)p, __float_as_uint(v));
}
// the mirror for min: a NaN is written as 0xffffffff (a negative int, the largest unsigned)
__device__ __forceinline__ void evt_atomic_amin(float* p, float v) {
  if (v != v) { atomicMax((unsigned int*)p, 0xffffffffu); return; }
  if (__float_as_int(v) >= 0) atomicMin((int*)p, __float_as_int(v));
  else atomicMax((unsigned int*)p, __float_as_uint(v));
}
__device__ __forceinline__ float evt_shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
// explicit shared-space accesses on 32-bit shared addresses: a generic pointer into dynamic shared
// memory compiles to generic ST/LD (an address-space check per access); volatile keeps them in
// program order with the barriers around them
__device__ __forceinline__ void evt_sts_u32(u32 addr, u32 v) { asm volatile("st.shared.u32 [%0], %1;" :: "r"(addr), "r"(v)); }
// the f32 forms (reduction buffers, shared by both mainloops) also order against __syncthreads()
__device__ __forceinline__ void evt_sts_f32(u32 addr, float v) { asm volatile("st.shared.f32 [%0], %1;" :: "r"(addr), "f"(v) : "memory"); }
__device__ __forceinline__ float evt_lds_f32(u32 addr) { float v; asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory"); return v; }
__device__ __forceinline__ void evt_lds_f32x2(u32 addr, float& x, float& y) {
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y) : "r"(addr));
}
"""

WATCHDOG = r"""
// ---- bounded waits: a broken pipeline ends as a flagged wrong answer, never a hung GPU ----
__device__ int evt_timeout_flag;
__device__ __forceinline__ bool evt_mbar_try(u32 bar, u32 parity) {
  u32 ok;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
  return ok != 0;
}
__device__ __forceinline__ void evt_mbar_wait_slow(u32 bar, u32 parity) {
  long long start = clock64();
  while (!evt_mbar_try(bar, parity)) {
    if (*(volatile int*)&evt_timeout_flag) return;
    if (clock64() - start > (1LL << 31)) { atomicExch(&evt_timeout_flag, 1); return; }
  }
}
__device__ __forceinline__ void evt_mbar_wait(u32 bar, u32 parity) {
  if (!evt_mbar_try(bar, parity)) evt_mbar_wait_slow(bar, parity);
}
"""

HOPPER = r"""
// ---- Hopper: mbarriers, TMA, wgmma (sm_90a) ----
struct __align__(64) TmaDesc { u64 v[16]; };
__device__ __forceinline__ u32 evt_smem_addr(const void* p) {
  u64 a; asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p)); return (u32)a;
}
__device__ __forceinline__ void evt_mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void evt_mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void evt_mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void evt_tma_load_2d(u32 dst, const TmaDesc* map, int x, int y, u32 bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"((u64)map), "r"(x), "r"(y), "r"(bar) : "memory");
}
__device__ __forceinline__ void evt_tma_load_3d(u32 dst, const TmaDesc* map, int x, int y, int z, u32 bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"((u64)map), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}
__device__ __forceinline__ void evt_tma_store_2d(const TmaDesc* map, int x, int y, u32 src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               :: "l"((u64)map), "r"(x), "r"(y), "r"(src) : "memory");
}
__device__ __forceinline__ void evt_tma_store_3d(const TmaDesc* map, int x, int y, int z, u32 src) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];"
               :: "l"((u64)map), "r"(x), "r"(y), "r"(z), "r"(src) : "memory");
}
// aux_tma reads: an explicit ld.shared (a generic load would pay the address-space check); volatile
// keeps it between the aux_full wait and the aux_empty arrive
__device__ __forceinline__ u32 evt_lds_u32(u32 addr) { u32 v; asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr)); return v; }
__device__ __forceinline__ u16 evt_lds_u16(u32 addr) { u16 v; asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr)); return v; }
__device__ __forceinline__ void evt_sts_u16(u32 addr, u16 v) { asm volatile("st.shared.u16 [%0], %1;" :: "r"(addr), "h"(v)); }
__device__ __forceinline__ void evt_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void evt_bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void evt_bulk_wait_read1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
__device__ __forceinline__ void evt_bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void evt_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void evt_named_bar(int id, int count) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory"); }
__device__ __forceinline__ void evt_named_bar_arrive(int id, int count) { asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(count) : "memory"); }
// shared-memory matrix descriptor, 128-byte swizzle (layout type 1 in bits 62-63)
__device__ __forceinline__ u64 evt_wgmma_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo & 0x3FFFF) >> 4) << 16)
       | ((u64)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
"""

AMPERE = r"""
// ---- sm_80: cp.async, ldmatrix, mma.sync ----
__device__ __forceinline__ u32 evt_smem_u32(const void* p) {
  u64 a; asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p)); return (u32)a;
}
// 16-byte async copy; src_bytes = 0 zero-fills the destination (out-of-bounds chunk)
__device__ __forceinline__ void evt_cp_async16(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void evt_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void evt_cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void evt_ldmatrix_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void evt_ldmatrix_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
"""


def prelude(hopper=False):
    """The helper text for one module: types, math, conversions, atomics, and the Hopper or
    Ampere instruction wrappers."""
    parts = [TYPES, MATH_HELPERS, CONVERT, ATOMICS, WATCHDOG, AMPERE]
    if hopper:
        parts.append(HOPPER)
    return "\n".join(parts)


def mma_sync(dtype):
    """The m16n8k16 mma.sync for fp16/bf16 inputs with fp32 accumulators, as a device function."""
    t = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    return (f"__device__ __forceinline__ void evt_mma(float* d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {{\n"
            f"  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 {{%0, %1, %2, %3}}, "
            f"{{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\"\n"
            f"               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
            f"               : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n}}\n")
