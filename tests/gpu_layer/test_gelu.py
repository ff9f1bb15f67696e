"""The shared erf-GELU polynomials (backends/gpu/gelu.py): their errors, emulated in float32 on
the CPU, against float64; the fast_math="auto" rule taking the fast one only for 16-bit
results; and the backends spelling them."""
import math

import numpy as np

from evt_core.tree.ops import Op

from bench import programs as P
from evt_backends.gpu.fastmath import chosen_fast_ops, fast_ops
from evt_backends.gpu.gelu import gelu_emulated as gelu_fast_reference
from evt_backends.gpu.gelu import gelu_grad_emulated

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _exact(x):
    x = x.astype(np.float64)
    return x * 0.5 * _erfc(-x / math.sqrt(2.0))


def test_fast_gelu_error_is_below_fp16_rounding():
    """Relative error under 3e-5 wherever gelu(x) is at least fp16's smallest subnormal
    (x > -5.3), absolute error under 1.2e-5 everywhere; stored in fp16, at most 2 ulp away
    from the exactly rounded value (as erff's spelling), and differing on under 1.5 % of inputs."""
    x = np.concatenate([np.linspace(-12, 12, 400_001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, -1e-30, 3.75 * math.sqrt(2), 60, -60], np.float32)])
    got, ref = gelu_fast_reference(x), _exact(x)
    assert np.abs(got - ref).max() < 1.2e-5 * np.maximum(1.0, np.abs(x)).max()
    live = x > -5.3
    rel = np.abs(got[live] - ref[live]) / np.maximum(np.abs(ref[live]), 1e-300)
    assert rel[np.abs(ref[live]) > 6e-8].max() < 3e-5
    g16, r16 = got.astype(np.float16).astype(np.float64), ref.astype(np.float16).astype(np.float64)
    ulp = np.maximum(np.abs(np.spacing(r16.astype(np.float16))).astype(np.float64), 2.0 ** -24)
    assert (np.abs(g16 - r16) / ulp).max() <= 2 and np.mean(g16 != r16) < 0.015


def test_accurate_gelu_grad_is_as_close_to_float64_as_erff_and_expf():
    """Phi(x) + x phi(x) with the ACCURATE polynomial: within 1.8e-7 absolute everywhere and
    6.5e-5 relative where |gelu_grad| > 1e-3 (erff + expf's spelling: 1.3e-7 and 3.9e-5)."""
    x = np.linspace(-12, 12, 400_001, dtype=np.float32)
    x64 = x.astype(np.float64)
    ref = 0.5 * _erfc(-x64 / math.sqrt(2.0)) + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
    d = np.abs(gelu_grad_emulated(x) - ref)
    assert d.max() < 1.8e-7
    big = np.abs(ref) > 1e-3
    assert (d[big] / np.abs(ref[big])).max() < 6.5e-5


def test_fast_gelu_special_values():
    got = gelu_fast_reference(np.array([np.inf, -np.inf, np.nan, 0.0, -200.0], np.float32))
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2])      # -inf * 0, as x * Phi(x)
    assert got[3] == 0 and got[4] == 0


def test_auto_takes_the_fast_gelu_only_for_16_bit_results():
    fp16_only = P.bias_gelu(gelu=Op.GELU)
    assert [fp16_only.instrs[i].op for i in fast_ops(fp16_only)] == [Op.GELU]
    b = P.ProgramBuilder()
    g = b.op(Op.GELU, b.op(Op.ADD, b.accum, b.load("bias", "float16", ("N",))))
    b.store(g, "D", "float32")
    assert chosen_fast_ops(b.build(), "auto") == ()
    assert chosen_fast_ops(P.bias_gelu(gelu=Op.GELU_GRAD), True) == ()     # gelu_grad stays accurate


def test_both_backends_spell_it_with_one_ex2():
    from evt_backends.cupy.codegen.spelling import MATH_HELPERS, spell
    from evt_backends.numba_cuda.codegen.spelling import spell as numba_spell
    assert spell(Op.GELU, ["v"], fast=True) == "evt_gelu_fast(v)"
    assert "evt_phi_fast(" in MATH_HELPERS.split("float evt_gelu_fast(float x)")[1].split("\n")[0]
    for name in ("evt_phi_fast", "evt_phi_accurate"):
        helper = MATH_HELPERS.split(f"float {name}(float x, float& s)")[1].split("\n}")[0]
        assert helper.count("ex2.approx") == 1 and "erff" not in helper
    src = numba_spell(Op.GELU, ["v"], fast=True)
    assert "ex2_approx(" in src and "erf" not in src
