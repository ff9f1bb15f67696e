"""Serial split-K for the cooperative sm90 kernel (option split_k), in CUDA C++: the work units,
split-major order and last-arriver fix-up of backends/gpu/splitk.py.

Each consumer warpgroup owns 64 rows of its tile, so the fix-up is per (tile, warpgroup): the
warpgroup stores its fp32 accumulators into its workspace slot, fences, and bumps the (tile,
warpgroup) counter; the one that bumps it last sums every split's partials (in split order, so
runs are bit-identical) into its registers, resets the counter for the next launch and runs the
epilogue, which therefore runs once per tile half. No warpgroup waits on another CTA, so no CTA
order can deadlock. A thread's registers hold the same fragment positions in every split, so
partials are stored per thread (coalesced over the 128 threads) without any layout knowledge.

Invariant: with split_k == 1 every function here returns the single-split text unchanged, so
the default kernels' sources do not change."""


def kernel_params(spec):
    """Extra kernel parameters: the partials workspace and the counters (device addresses)."""
    if spec.split_k == 1:
        return ""
    return ", const unsigned long long skw, const unsigned long long skc"


def unit_loop(spec, bk, indent):
    """(loop head over this CTA's work units, first k, k limit). The head defines t (the tile)
    and, split, sp, kbeg and kend."""
    if spec.split_k == 1:
        return "for (int t = blockIdx.x; t < a.tiles; t += gridDim.x, ++it) {", "0", "a.K"
    i = indent
    head = (f"const int KBT = (a.K + {bk - 1}) / {bk}, ns = min({spec.split_k}, KBT);\n"
            f"{i}for (int u = blockIdx.x; u < a.tiles * ns; u += gridDim.x, ++it) {{\n"
            f"{i}  const int t = u % a.tiles, sp = u / a.tiles;   // split-major: see the module doc\n"
            f"{i}  const int kbeg = (int)((long long)sp * KBT / ns) * {bk};\n"
            f"{i}  const int kend = min(a.K, (int)((long long)(sp + 1) * KBT / ns) * {bk});")
    return head, "kbeg", "kend"


def fixup(spec, nacc):
    """After the mainloop: store this split's partials; only the last split of the tile half
    goes on (with the sum of all splits in d) to the epilogue."""
    if spec.split_k == 1:
        return ""
    slot = f"{nacc * 128}"
    return f"""      // ---- split-K: the last split of this tile half sums the partials and runs the epilogue ----
      if (ns > 1) {{
        float* mine = (float*)skw + ((long long)(t * 2 + wg) * {spec.split_k} + sp) * {slot};
        #pragma unroll
        for (int i = 0; i < {nacc}; ++i) mine[i * 128 + tid] = d[i];
        __threadfence();
        evt_named_bar(1 + wg, 128);
        if (tid == 0)
          evt_sk_last[wg] = atomicAdd((unsigned*)skc + t * 2 + wg, 1u) == (unsigned)(ns - 1);
        evt_named_bar(1 + wg, 128);
        if (!evt_sk_last[wg]) continue;             // another split finishes this tile half
        __threadfence();
        // summed in split order whichever split arrives last, so runs are bit-identical
        #pragma unroll
        for (int i = 0; i < {nacc}; ++i) d[i] = 0.f;
        for (int o = 0; o < ns; ++o) {{
          const float* part = (const float*)skw + ((long long)(t * 2 + wg) * {spec.split_k} + o) * {slot};
          #pragma unroll
          for (int i = 0; i < {nacc}; ++i) d[i] += __ldcg(part + i * 128 + tid);
        }}
        if (tid == 0) ((unsigned*)skc)[t * 2 + wg] = 0u;   // ready for the next launch
      }}
"""


def shared_decl(spec):
    return "" if spec.split_k == 1 else "\n  __shared__ int evt_sk_last[2];"
