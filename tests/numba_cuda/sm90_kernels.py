"""Representative sm_90a kernels for the CPU SASS checks and bench/SASS-numba.md: each is built
once per process (numba -> LTO-IR -> nvJitLink for sm_90a, no GPU needed) and cached."""
import numpy as np

import evt_core
from evt_core import ops

from trees import case

_built = {}


def require_build_tools(tmp_path_factory, cache_name):
    """Skip unless numba, nvJitLink and the cuobjdump wheel are installed; builds go to a fresh
    cache folder (a module's fixture calls this once)."""
    import os

    import pytest
    pytest.importorskip("numba.cuda")
    pytest.importorskip("cuda.bindings.nvjitlink")
    pytest.importorskip("nvidia")
    os.environ["EVT_CACHE_DIR"] = str(tmp_path_factory.mktemp(cache_name))


def _bare(accum):
    D = accum
    return D


def _bias_gelu(accum, bias):
    D = ops.gelu_tanh(accum + bias)
    return D


def _ffn_forward(accum, bias):
    z = accum + bias
    D = ops.gelu(z)
    return z, D


def _ffn_relu(accum, bias):
    z = accum + bias
    D = ops.relu(z)
    return z, D


def _bias_relu(accum, bias):
    D = ops.relu(accum + bias)
    return D


def _col_sums(accum, bias):
    D = accum + bias
    S = ops.sum(D, over="M")
    return D, S


def _layernorm_stats(accum, bias, r):
    y = accum + bias + r
    y_sum = ops.sum(y, over="N")
    y_sqsum = ops.sum(y * y, over="N")
    return y, y_sum, y_sqsum


def _layernorm_backward(accum, g, x):
    dx = accum * g + x
    s1 = ops.sum(dx * g, over="M")
    s2 = ops.sum(g, over="M")
    return dx, s1, s2


def _gelu_backward(accum, z):
    dz = accum * ops.gelu_grad(z)
    dbias = ops.sum(dz, over="M")
    return dz, dbias


def _row_col_stats(accum, bias):
    """Row, column and whole-tile reductions beside a column vector, no (M, N) input (a kind
    split-K takes)."""
    y = accum + bias
    y_rowsum = ops.sum(y, over="N")
    y_colmax = ops.amax(y, over="M")
    y_min = ops.amin(y, over=("M", "N"))
    return y, y_rowsum, y_colmax, y_min


def _trace(fn, extra, out_dtype, outputs=("D",)):
    ex = {"accum": np.empty((64, 64), np.float32), **extra, **{o: np.empty((64, 64), out_dtype) for o in outputs}}
    return evt_core.trace(fn, ex).program


def programs():
    """name -> (program, ab dtype, B K-major, A batched, B batched, deterministic, ping-pong,
    (M, N) inputs staged by cp.async, fragment epilogue with TMA-stored outputs[, A K-major: True
    when left out[, fast_math="auto"'s MUFU spellings: False when left out[, tile width BN: 128
    when left out[, (M, N) inputs TMA-loaded through the ring: False when left out[, the
    overlapped cooperative schedule: False when left out[, serial split-K: False when left
    out]]]]]])."""
    brs = case("bias_relu_stats", 2, 13, 11, 9)[0].program
    ln_stats = evt_core.trace(_layernorm_stats, {"accum": np.empty((64, 64), np.float32), "bias": np.empty((64,), np.float16),
                                                 "r": np.empty((64, 64), np.float16), "y": np.empty((64, 64), np.float16),
                                                 **{k: np.empty((64,), np.float32) for k in ("y_sum", "y_sqsum")}}).program
    ln_back = evt_core.trace(_layernorm_backward, {"accum": np.empty((2, 64, 64), np.float32),
                                                   "g": np.empty((2, 64, 64), np.float16),
                                                   "x": np.empty((2, 64, 64), np.float16),
                                                   "dx": np.empty((2, 64, 64), np.float16),
                                                   **{k: np.empty((2, 64), np.float32) for k in ("s1", "s2")}}).program
    gelu_back = evt_core.trace(_gelu_backward, {"accum": np.empty((64, 64), np.float32),
                                                "z": np.empty((64, 64), np.float16),
                                                "dz": np.empty((64, 64), np.float16),
                                                "dbias": np.empty((64,), np.float32)}).program
    return {
        "bare": (_trace(_bare, {}, np.float16), "float16", False, False, False, False, False, False, False),
        "bias_gelu": (_trace(_bias_gelu, {"bias": np.empty((64,), np.float32)}, np.float16),
                      "bfloat16", True, False, False, False, False, False, False),
        # row/col/all reductions, an (M, N) aux input, two outputs; deterministic partials
        "reductions_aux_two_outputs": (brs, "float16", False, True, True, True, False, False, False),
        # reductions over L and MEAN, batched operands (3-D tensor maps)
        "means_batched": (case("means", 3, 13, 11, 9)[0].program, "bfloat16", True, True, False, False, False,
                          False, False),
        # the ping-pong schedule: two m64n128 fragments per warpgroup, the 128-row epilogue
        "pingpong_bias_gelu": (_trace(_bias_gelu, {"bias": np.empty((64,), np.float32)}, np.float16),
                               "float16", False, False, False, False, True, False, False),
        "pingpong_reductions": (brs, "bfloat16", True, True, False, True, True, False, False),
        # an (M, N) bf16 input copied into shared memory under the mainloop (a 3-slot ring)
        "staged_dgelu": (case("dgelu", 2, 13, 11, 9, ab="bfloat16", out="bfloat16")[0].program, "bfloat16", False,
                         True, True, False, False, True, False),
        # the fragment epilogue: the tree on the wgmma fragments, outputs by TMA stores
        "frag_pingpong_bias_relu": (_trace(_bias_relu, {"bias": np.empty((64,), np.float16)}, np.float16),
                                    "float16", False, False, False, False, True, False, True),
        # row, column and whole-tile reductions, a row vector and an (M, N) input staged by cp.async
        "frag_stats_det": (case("stats", 2, 13, 11, 9, ab="bfloat16", out="bfloat16")[0].program, "bfloat16", True,
                           True, True, True, False, True, True),
        # XML-CNN's U-turn forward: an fp32 (M, N) input (the targets) staged by cp.async and read a
        # column pair per 64-bit load, a whole-tile and a column reduction, one 16-bit output
        "frag_bce_uturn": (case("bce_uturn", 0, 13, 11, 9)[0].program, "float16", False, False, False, False,
                           False, True, True),
        # an M-contiguous A (a weight gradient's transposed activations): TMA panels, trans-a wgmma
        "mmajor_a_bias_gelu": (_trace(_bias_gelu, {"bias": np.empty((64,), np.float32)}, np.float16),
                               "float16", False, False, False, False, False, False, False, False),
        # BERT's FFN forward: z and the erf-form gelu(z), both fp16, so gelu takes the fast spelling;
        # cooperative and ping-pong (two outputs beside 128 accumulators: 40 registers spilled until
        # the staging addresses were derived per tile, ptx_sm90.per_tile)
        "frag_ffn_gelu_fast": (_trace(_ffn_forward, {"bias": np.empty((64,), np.float16)}, np.float16, ("z", "D")),
                               "float16", False, False, False, False, False, False, True, True, True),
        "frag_pingpong_ffn_gelu_fast": (_trace(_ffn_forward, {"bias": np.empty((64,), np.float16)}, np.float16,
                                               ("z", "D")),
                                        "float16", False, False, False, False, True, False, True, True, True),
        "frag_pingpong_mmajor_a": (_trace(_bias_relu, {"bias": np.empty((64,), np.float16)}, np.float16),
                                   "bfloat16", True, False, False, False, True, False, True, False),
        # 128 x 256 tiles (select.sm90_tile_n): m64n256k16, 128 accumulators per thread, 48 KB
        # ring slots; cooperative with the fragment epilogue, the kinds the rule admits (a plain
        # store recycles two panel buffers per warpgroup beside a 4-slot ring)
        "wide_bare": (_trace(_bare, {}, np.float16), "float16", False, False, False, False, False, False, True,
                      True, False, 256),
        # a weight gradient (BERT's dW = X^T dY): M-contiguous A, N-major B, a plain store
        "wide_mmajor_a_bare": (_trace(_bare, {}, np.float16), "bfloat16", False, False, False, False, False, False,
                               True, False, False, 256),
        # a column vector, two values per thread and tile; a K-major B read as one 256-row box
        "wide_bias_gelu": (_trace(_bias_gelu, {"bias": np.empty((64,), np.float32)}, np.float16),
                           "float16", True, False, True, False, False, False, True, True, True, 256),
        # W1's kind at 128 x 256: z and relu(z) staged in two recycled 8 KB panel buffers per
        # warpgroup each, every panel TMA-stored behind its own barrier (a 3-slot ring)
        "wide_ffn_relu_two_outputs": (_trace(_ffn_relu, {"bias": np.empty((64,), np.float16)}, np.float16,
                                             ("z", "D")),
                                      "float16", False, False, False, False, False, False, True, True, True, 256),
        # W2's kind at 128 x 256: a column vector and a column sum (64 partials a thread
        # reduce-scattered over the warpgroup's scratch), the whole tile staged (a 3-slot ring)
        "wide_bias_col_sums": (evt_core.trace(_col_sums, {"accum": np.empty((64, 64), np.float32),
                                                          "bias": np.empty((64,), np.float16),
                                                          "D": np.empty((64, 64), np.float16),
                                                          "S": np.empty((64,), np.float32)}).program,
                               "float16", False, False, False, False, False, False, True, True, True, 256),
        # (M, N) inputs TMA-loaded through the ring (select.sm90_aux_ring): W4's residual beside a
        # column vector and two row sums; BERT's LayerNorm backward, two batched inputs (3-D
        # maps), two aux stages per tile, column sums
        "frag_ring_layernorm_stats": (ln_stats, "float16", False, False, False, False, False, False, True, True,
                                      False, 128, True),
        "frag_ring_two_inputs_batched": (ln_back, "float16", True, True, True, False, False, False, True, True,
                                         False, 128, True),
        # W4 at 128 x 256 (sm90_tile_n=256): the residual's 8 panels in two ring positions after
        # the k-blocks of a 3-slot ring, 2 x 2 bias values per thread, two row sums over 256 columns
        "wide_ring_layernorm_stats": (ln_stats, "float16", False, False, False, False, False, False, True, True,
                                      False, 256, True),
        # the overlapped cooperative schedule (consumer_overlap.py): two accumulator sets, a tile's
        # epilogue in pieces between the next tile's k-blocks. BERT's GELU backward (the erf form's
        # derivative times the accumulator, an (M, N) input through the ring, a column sum: 4
        # pieces beside a 5-slot ring) and W4's kind (a column vector handed to the next tile,
        # a residual through the ring, two row sums)
        "overlap_gelu_backward": (gelu_back, "float16", False, False, False, False, False, False, True, True,
                                  False, 128, True, True),
        "overlap_layernorm_stats": (ln_stats, "float16", False, False, False, False, False, False, True, True,
                                    False, 128, True, True),
        # BERT's LayerNorm backward: two batched (M, N) inputs read whole by the first piece
        # (64 words a thread beside both accumulator sets), column sums
        "overlap_two_inputs_batched": (ln_back, "float16", True, True, True, False, False, False, True, True,
                                       False, 128, True, True),
        # BERT's FFN forward (no (M, N) input: the drain after the next tile's k-blocks runs on
        # every path, else ptxas inserted a wait of its own in a branch and serialised the wgmmas)
        "overlap_ffn_gelu": (_trace(_ffn_forward, {"bias": np.empty((64,), np.float16)}, np.float16, ("z", "D")),
                             "float16", False, False, False, False, False, False, True, True, True, 128, False, True),
        # serial split-K (codegen/splitk.py): (tile, split) units, partials and the last split's
        # fix-up before the epilogue. A bare store; a weight gradient at 128 x 256 (M-major A,
        # 128 accumulators stored and summed); W2's kind (a column vector and a column sum)
        # with deterministic partials; the staged epilogue with row, column and tile reductions, batched
        "split_bare": (_trace(_bare, {}, np.float16), "float16", False, False, False, False, False, False, True,
                       True, False, 128, False, False, True),
        "split_wide_mmajor_a_bare": (_trace(_bare, {}, np.float16), "bfloat16", False, False, False, False, False,
                                     False, True, False, False, 256, False, False, True),
        "split_col_sums_det": (evt_core.trace(_col_sums, {"accum": np.empty((64, 64), np.float32),
                                                          "bias": np.empty((64,), np.float16),
                                                          "D": np.empty((64, 64), np.float16),
                                                          "S": np.empty((64,), np.float32)}).program,
                               "float16", False, False, False, True, False, False, True, True, True, 128, False,
                               False, True),
        "split_staged_stats_batched": (evt_core.trace(_row_col_stats, {"accum": np.empty((2, 64, 64), np.float32),
                                                                       "bias": np.empty((64,), np.float32),
                                                                       "y": np.empty((2, 64, 64), np.float16),
                                                                       "y_rowsum": np.empty((2, 64), np.float32),
                                                                       "y_colmax": np.empty((2, 64), np.float32),
                                                                       "y_min": np.empty((2,), np.float32)}).program,
                                       "bfloat16", True, True, False, False, False, False, False, True, False, 128,
                                       False, False, True),
    }


def build(name):
    if name not in _built:
        from evt_backends.numba_cuda.runtime import build as nb
        from evt_backends.numba_cuda.codegen.mainloop_sm90 import module_prelude, sm90_params, sm90_source
        from evt_backends.gpu.fastmath import fast_ops
        p, ab, kmajor, a_batched, b_batched, det, pingpong, aux, frag, *rest = programs()[name]
        defaults = [True, False, 128, False, False, False]
        a_kmajor, fast, bn, ring, overlap, split = (list(rest) + defaults[len(rest):])[:6]
        src = module_prelude(ab, kmajor, a_kmajor, bn) + "\n" + sm90_source(
            p, ab, kmajor, a_batched, b_batched, det, pingpong, aux, frag, fast=fast_ops(p) if fast else (),
            a_kmajor=a_kmajor, bn=bn, aux_ring=ring, overlap=overlap, split=split)
        key = nb.cache_key("sm90_kernels", name, p.key(), src)
        _built[name] = nb.build(key, src, "evt_kernel", sm90_params(p, frag, ring, split), sm90a=True)
    return _built[name]
