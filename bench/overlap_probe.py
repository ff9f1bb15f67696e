"""Which epilogue work runs under a warpgroup's wgmma? A micro-benchmark that decides the
overlapped schedules' design (issue 9: run 93's counters showed none of the overlapped kernel's
epilogue pieces running under its k-blocks' MMAs).

Two consumer warpgroups, one CTA per SM, no producer: the A and B tiles sit in shared memory
(128B-swizzled, K-major, the kernels' layout; their contents do not matter for timing). Each
warpgroup runs `iters` rounds of: fence; four m64n128k16 wgmmas (one 64-deep k-block) into
accumulator set 1; commit; a *piece*; wait until at most one group is in flight. The
piece reads accumulator set 0 (filled by a wgmma before the loop), as an overlapped epilogue
reads the previous tile's accumulators. Modes:

  both         both warpgroups: wgmma + piece (the overlapped cooperative schedule)
  mma          both warpgroups: wgmma only (the tensor-pipe time alone)
  piece        both warpgroups: piece only (the piece's time alone)
  split        warpgroup 0 wgmma only, warpgroup 1 piece only (ping-pong's concurrency)
  interleaved  both warpgroups: a quarter of the piece after each single wgmma
  piece1       warpgroup 1 piece only, warpgroup 0 idle (split's piece alone)

Each warpgroup also counts the cycles it spends issuing its k-block's wgmmas (a wgmma's issue
waits while the tensor pipe is busy).

Pieces (`n` repetitions each): fma (16 independent FFMA chains), mufu (ex2 + rcp), lds (one
st.shared + one ld.shared of 4 bytes, conflict-free, in a region the wgmmas do not read), shfl
(4 xor shuffles), w2 (8 elements of W2's epilogue: a 16-bit pair loaded from shared memory,
gelu_tanh' by ex2 + rcp, times the accumulator, packed and stored to shared memory, a column
partial kept). If `both` takes about max(mma, piece) cycles the piece overlaps; about
mma + piece, it serialises.

    python3 -m bench.overlap_probe [--out DIR]      # needs an sm_90 GPU and cupy
    python3 -m bench.overlap_probe --source          # print the CUDA source (no GPU)
"""
import argparse
import json
import os
import sys

PIECES = ("none", "fma", "mufu", "lds", "shfl", "w2")
MODES = ("both", "mma", "piece", "split", "interleaved", "piece1")
SMEM_BYTES = 8192 * 2 + 16384 + 65536 + 1024     # A per warpgroup, B, the pieces' region, alignment


def _wgmma_helper():
    regs = ", ".join(f"%{i}" for i in range(64))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(64))
    return (
        "__device__ __forceinline__ void mma(float* d, u64 da, u64 db) {\n"
        f'  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{{regs}}}, %64, %65, 1, 1, 1, 0, 0;\\n"\n'
        f"    : {outs} : \"l\"(da), \"l\"(db));\n}}\n")


SOURCE = r"""
typedef unsigned long long u64; typedef unsigned int u32;
__device__ __forceinline__ u64 desc(u32 addr) {            // 128B swizzle, K-major, 1 KB between 8-row groups
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float rcp(float x) { float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ void sts(u32 a, u32 v) { asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(v) : "memory"); }
__device__ __forceinline__ u32 lds(u32 a) { u32 v; asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a) : "memory"); return v; }
WGMMA_HELPER
__device__ __forceinline__ void kblock(float* d, u32 sa, u32 sb) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  #pragma unroll
  for (int k = 0; k < 4; ++k) mma(d, desc(sa + 32 * k), desc(sb + 32 * k));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int PENDING> __device__ __forceinline__ void wait_groups() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(PENDING) : "memory");
}

// one piece: reads accumulator set 0 (a), keeps its results in x (16 floats), region at `buf`;
// every register index a compile-time constant
template <int PIECE> __device__ __forceinline__ void piece(const float* a, float* x, int n, u32 buf, int tid) {
  for (int r = 0; r < n; ++r) {
    {
      const int rr = 0;
      if (PIECE == 1) {                             // fma: 16 independent chains
        #pragma unroll
        for (int i = 0; i < 16; ++i) x[i] = fmaf(x[i], a[i + 16 * rr], 1.0001f);
      } else if (PIECE == 2) {                      // mufu: ex2 + rcp on 8 values
        #pragma unroll
        for (int i = 0; i < 8; ++i) x[i] = rcp(1.0f + ex2(x[i] * a[i + 8 * rr]));
      } else if (PIECE == 3) {                      // lds: one store, one load, 4 bytes, conflict-free
        const u32 slot = buf + 4u * (u32)((r * 128 + tid) & 16383);
        sts(slot, __float_as_uint(x[rr] + a[rr]));
        x[rr + 4] += __uint_as_float(lds(slot ^ 512u));
      } else if (PIECE == 4) {                      // shfl: 4 xor shuffles
        #pragma unroll
        for (int i = 0; i < 4; ++i) x[i] += __shfl_xor_sync(0xffffffffu, x[i] * a[i + 4 * rr], 1 << (r & 3));
      } else if (PIECE == 5) {                      // w2: 8 elements of dx = acc * gelu_tanh'(z), colsum
        const u32 row = buf + 4u * (u32)((r * 512 + tid * 4) & 8191);
        u32 zz[4], packed[4];
        #pragma unroll
        for (int h = 0; h < 4; ++h) zz[h] = lds(row + 4 * (h ^ (tid & 3)));
        #pragma unroll
        for (int h = 0; h < 4; ++h) {
          float z[2], o[2];
          z[0] = __half2float(__ushort_as_half((unsigned short)(zz[h] & 0xffff)));
          z[1] = __half2float(__ushort_as_half((unsigned short)(zz[h] >> 16)));
          #pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float x2 = z[e] * z[e], v = z[e] * (-2.3022082f - 0.1029432f * x2);
            const float ee = ex2(fminf(v, 126.f)), s = rcp(1.0f + ee);
            const float g = (z[e] * (s * (ee * s))) * (1.5957692f + 0.2145034f * x2) + s;
            o[e] = (v > 126.f ? 0.f : g) * a[2 * h + e + 8 * rr];
            x[2 * h + e] += o[e];
          }
          packed[h] = (u32)__half_as_ushort(__float2half_rn(o[0])) | ((u32)__half_as_ushort(__float2half_rn(o[1])) << 16);
        }
        #pragma unroll
        for (int h = 0; h < 4; ++h) sts(row + 32768 + 4 * (h ^ (tid & 3)), packed[h]);
      }
    }
  }
}

template <int PIECE, bool MMA, bool PIECES>
__device__ __forceinline__ void loop(int iters, int n, u32 sa, u32 sb, u32 buf, int tid, float* d0, float* d1, float* x,
                                     long long& issue) {
  for (int it = 0; it < iters; ++it) {
    if (MMA) { const long long t = clock64(); kblock(d1, sa, sb); issue += clock64() - t; }
    if (PIECES) piece<PIECE>(d0, x, n, buf, tid);
    if (MMA) wait_groups<1>();                      // the overlapped schedule: the previous group is done
  }
  if (MMA) wait_groups<0>();
}

// a quarter of the piece after each of the k-block's four wgmmas, one commit after the last
template <int PIECE>
__device__ __forceinline__ void loop_interleaved(int iters, int n, u32 sa, u32 sb, u32 buf, int tid, float* d0, float* d1,
                                                 float* x, long long& issue) {
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
      const long long t = clock64();
      mma(d1, desc(sa + 32 * k), desc(sb + 32 * k));
      issue += clock64() - t;
      piece<PIECE>(d0, x, n / 4, buf, tid);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    wait_groups<1>();
  }
  wait_groups<0>();
}

// MODE: 0 both, 1 mma only, 2 piece only, 3 split (warpgroup 0 mma, 1 piece), 4 interleaved,
// 5 warpgroup 1 piece only (warpgroup 0 idle: split's piece alone)
template <int PIECE, int MODE>
__device__ void run(int iters, int n, u32 sa, u32 sb, u32 buf, int wg, int tid, long long* cyc, float* sink) {
  float d0[64], d1[64], x[16];
  #pragma unroll
  for (int i = 0; i < 64; ++i) { d0[i] = 0.f; d1[i] = 0.f; }
  #pragma unroll
  for (int i = 0; i < 16; ++i) x[i] = 1.0f + tid * 1e-3f + i;
  kblock(d0, sa, sb);                               // set 0: what the pieces read
  wait_groups<0>();
  long long issue = 0;
  asm volatile("bar.sync 1, 256;" ::: "memory");
  long long t0 = clock64();
  if (MODE == 0) loop<PIECE, true, true>(iters, n, sa, sb, buf, tid, d0, d1, x, issue);
  if (MODE == 1) loop<PIECE, true, false>(iters, n, sa, sb, buf, tid, d0, d1, x, issue);
  if (MODE == 2) loop<PIECE, false, true>(iters, n, sa, sb, buf, tid, d0, d1, x, issue);
  if (MODE == 3) {
    if (wg == 0) loop<PIECE, true, false>(iters, n, sa, sb, buf, tid, d0, d1, x, issue);
    else loop<PIECE, false, true>(iters, n, sa, sb, buf, tid, d0, d1, x, issue);
  }
  if (MODE == 4) loop_interleaved<PIECE>(iters, n, sa, sb, buf, tid, d0, d1, x, issue);
  if (MODE == 5 && wg == 1) loop<PIECE, false, true>(iters, n, sa, sb, buf, tid, d0, d1, x, issue);
  long long t1 = clock64();
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < 64; ++i) s += d1[i] + d0[i];
  #pragma unroll
  for (int i = 0; i < 16; ++i) s += x[i];
  sink[blockIdx.x * 256 + wg * 128 + tid] = s;
  if (tid == 0) { cyc[blockIdx.x * 4 + wg * 2] = t1 - t0; cyc[blockIdx.x * 4 + wg * 2 + 1] = issue; }
}

#define ENTRY(P, M) extern "C" __global__ void __launch_bounds__(256, 1) \
  probe_##P##_##M(int iters, int n, long long* cyc, float* sink) { \
  extern __shared__ unsigned char smem_raw[]; \
  const u32 base = ((u32)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u; \
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128; \
  for (int i = threadIdx.x; i < (16384 + 16384 + 65536) / 4; i += 256) sts(base + 4 * i, 0x3c003c00u ^ (i * 2654435761u & 0x03ff03ffu)); \
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); \
  __syncthreads(); \
  run<P, M>(iters, n, base + 8192 * wg, base + 16384, base + 32768, wg, tid, cyc, sink); }
ENTRY(0, 1) ENTRY(0, 3)
ENTRY(1, 0) ENTRY(1, 2) ENTRY(1, 3) ENTRY(1, 4) ENTRY(1, 5)
ENTRY(2, 0) ENTRY(2, 2) ENTRY(2, 3) ENTRY(2, 4) ENTRY(2, 5)
ENTRY(3, 0) ENTRY(3, 2) ENTRY(3, 3) ENTRY(3, 4) ENTRY(3, 5)
ENTRY(4, 0) ENTRY(4, 2) ENTRY(4, 3) ENTRY(4, 4) ENTRY(4, 5)
ENTRY(5, 0) ENTRY(5, 2) ENTRY(5, 3) ENTRY(5, 4) ENTRY(5, 5)
""".replace("WGMMA_HELPER", _wgmma_helper())


def source():
    return "#include <cuda_fp16.h>\n" + SOURCE


def measure(cp, module, piece_name, mode, n, iters, sms):
    """Per warpgroup, cycles per round and cycles per round spent issuing the k-block's wgmmas,
    averaged over the CTAs (one per SM): ((wg0 total, wg0 issue), (wg1 total, wg1 issue))."""
    fn = module.get_function(f"probe_{PIECES.index(piece_name)}_{MODES.index(mode)}")
    fn.max_dynamic_shared_size_bytes = SMEM_BYTES
    cyc = cp.zeros(sms * 4, dtype=cp.int64)
    sink = cp.zeros(sms * 256, dtype=cp.float32)
    fn((sms,), (256,), (cp.int32(iters), cp.int32(n), cyc, sink), shared_mem=SMEM_BYTES)
    cp.cuda.Device().synchronize()
    m = cyc.get().reshape(sms, 2, 2).mean(axis=0) / iters
    return [[round(float(v), 1) for v in wg] for wg in m]


SIZES = {"fma": (4, 16, 64), "mufu": (4, 16), "lds": (8, 32, 128), "shfl": (4, 16), "w2": (1, 2, 4, 8)}


def _row(r):
    both, inter, split = r["both"], r["interleaved"], r["split"]
    serial = r["mma"][0][0] + r["piece"]
    hidden = lambda t: f"{100 * (serial - t) / min(r['mma'][0][0], r['piece']):.0f} %"   # noqa: E731
    inter_s = "" if inter is None else f"{max(inter[0][0], inter[1][0]):.0f} ({inter[0][1]:.0f}) {hidden(max(inter[0][0], inter[1][0]))}"
    return (f"| {r['kind']} | {r['n']} | {r['piece']:.0f} | {r['piece1']:.0f} | "
            f"{max(both[0][0], both[1][0]):.0f} ({both[0][1]:.0f}) {hidden(max(both[0][0], both[1][0]))} | {inter_s} | "
            f"{split[0][0]:.0f} / {split[1][0]:.0f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--iters", type=int, default=256)
    ap.add_argument("--source", action="store_true", help="print the CUDA source and exit")
    args = ap.parse_args(argv)
    if args.source:
        print(source())
        return 0
    import cupy as cp
    module = cp.RawModule(code=source(), options=("-arch=sm_90a", "--std=c++17"))
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    measure(cp, module, "none", "mma", 0, 8, sms)                          # warm
    mma = measure(cp, module, "none", "mma", 0, args.iters, sms)
    mma1 = measure(cp, module, "none", "split", 0, args.iters, sms)          # warpgroup 0 alone
    rows = []
    for name, ns in SIZES.items():
        for n in ns:
            measure(cp, module, name, "both", n, 8, sms)                    # warm
            r = {"kind": name, "n": n, "mma": mma, "mma1": mma1}
            for mode in ("piece", "piece1", "both", "split", "interleaved"):
                if mode == "interleaved" and n % 4:
                    r[mode] = None
                    continue
                r[mode] = measure(cp, module, name, mode, n, args.iters, sms)
            r["piece"] = max(r["piece"][0][0], r["piece"][1][0])
            r["piece1"] = r["piece1"][1][0]
            rows.append(r)
    lines = [f"wgmma alone, both warpgroups: {mma[0][0]:.0f} cycles a round ({mma[0][1]:.0f} of them issuing the four "
             f"wgmmas); warpgroup 0 alone: {mma1[0][0]:.0f} ({mma1[0][1]:.0f} issuing)", "",
             "| piece | n | piece alone (2 wg) | piece alone (1 wg) | both: wgmma then piece (issuing), hidden | "
             "interleaved: a quarter after each wgmma (issuing), hidden | split: wg0 wgmma / wg1 piece |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [_row(r) for r in rows]
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    text = (f"device: {dev}; cycles per round (4 wgmma m64n128k16 per warpgroup, the piece, wait_group 1), the "
            f"slower warpgroup, mean over {sms} CTAs. hidden = (wgmma alone + piece alone - both) / min(wgmma alone, "
            f"piece alone): 100 % = the shorter one entirely under the other, 0 % = serialised\n\n" + "\n".join(lines))
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "overlap_probe.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(args.out, "overlap_probe.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
