"""The numba sm_90a kernel's aux_ring (16-bit (M, N) epilogue inputs TMA-loaded into the mainloop
ring after each tile's k-blocks): the producer's loads and the fragment epilogue's reads agree
element by element, every ring slot the consumer waits for is released once, and select takes the
ring only where it fits. CPU only: the generated lines are executed as Python with the
instructions stubbed."""
import numpy as np
import pytest

import evt_core

from evt_backends.gpu import sm90


def _program(n_inputs, dtype=np.float16):
    """D = accum * g (+ x) (+ y): a tree over n_inputs (M, N) inputs of `dtype`."""
    names = ["g", "x", "y"][:n_inputs]
    src = "def epi(accum, " + ", ".join(names) + "):\n    D = accum"
    for k in names:
        src += f" * {k}" if k == "g" else f" + {k}"
    src += "\n    return {'D': D}\n"
    scope = {}
    exec(src, scope)
    ex = {"accum": np.empty((64, 64), np.float32), "D": np.empty((64, 64), np.float16),
          **{k: np.empty((64, 64), dtype) for k in names}}
    return evt_core.trace(scope["epi"], ex).program


def _swizzled(dst, y, x):
    """Byte address of element (y, x) of a 64 x 64 16-bit box TMA-loaded at dst, 128B swizzle."""
    return dst + y * 128 + ((x // 8) ^ (y % 8)) * 16 + (x % 8) * 2


def _run(lines, env):
    exec("\n".join(lines), env)
    return env


def _producer_loads(program, lay, s0):
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import _aux_ring_loads
    maps, lines = _aux_ring_loads(program, lay)
    loads, expects = [], {}
    env = {"s": s0, "ph": 0, "sbase": 0, "bars": 1 << 20, "werr": 0, "m0": 0, "n0": 0, "l": 0,
           "mbar_wait": lambda *a: None,
           "mbar_expect_tx": lambda fb, n: expects.__setitem__(fb, n),
           "tma_load_2d": lambda dst, tm, x, y, fb: loads.append((tm, dst, x, y, fb)),
           **{tm: tm for tm in maps}}      # a map's name stands for the map
    _run(lines, env)
    return maps, loads, expects, env["s"], env["ph"]


# (inputs, tile width): at 128 x 256 one input's 8 panels take two 48 KB positions of a 3-slot
# ring; two inputs would take three (ring_holds_aux wants a fourth slot: no room beside the output)
SHAPES = [(1, 128), (2, 128), (3, 128), (1, 256)]


@pytest.mark.parametrize("n_inputs,bn", SHAPES)
@pytest.mark.parametrize("s0", [0, 2, 4])
def test_epilogue_reads_what_the_producer_loaded(n_inputs, bn, s0):
    from evt_backends.numba_cuda.codegen.epilogue_fragment import _Writer
    from evt_backends.numba_cuda.codegen.frag_layout import FragLayout
    p = _program(n_inputs)
    lay = FragLayout(p, bn, False, False, aux_ring=True)
    assert lay.aux_ring and lay.fits and not lay.aux and lay.stages >= 3
    s0 %= lay.stages
    maps, loads, expects, s_end, ph_end = _producer_loads(p, lay, s0)
    assert maps == [f"tmX{x}" for x in range(n_inputs)]
    stage = sm90.stage_bytes(bn)
    # every load stays inside its stage, and each stage expects exactly the bytes loaded into it
    per_bar = {}
    for tm, dst, x, y, fb in loads:
        slot = (fb - (1 << 20)) // 8
        assert slot * stage <= dst and dst + sm90.PANEL_BYTES <= (slot + 1) * stage
        per_bar[fb] = per_bar.get(fb, 0) + sm90.PANEL_BYTES
    assert per_bar == expects
    assert len(expects) == lay.aux_stages
    assert (s_end - s0) % lay.stages == lay.aux_stages % lay.stages
    landed = {}
    for tm, dst, x0, y0, _ in loads:
        for y in range(64):
            for x in range(64):
                landed[(int(tm[3:]), y0 + y, x0 + x)] = _swizzled(dst, y, x)
    assert len(landed) == n_inputs * 128 * bn
    ring = _Writer(p, lay, ["acc"], False).ring
    lines = _Writer(p, lay, ["acc"], False)._ring_panels()
    for wg in range(2):
        for tid in range(128):
            w, fg, fq = tid // 32, (tid % 32) // 4, tid % 4
            env = _run(lines, {"wg": wg, "w": w, "fg": fg, "fq": fq, "s_aux": s0, "sbase": 0})
            for x, k in enumerate(ring):
                for j in range(bn // 8):
                    for r in range(2):
                        for e in range(2):
                            at = env[f"apan{k}_{j // 8}"] + 1024 * r + (fg ^ (j & 7)) * 16 + 2 * e
                            row, col = 64 * wg + 16 * w + fg + 8 * r, 8 * j + 2 * fq + e
                            assert landed[(x, row, col)] == at, (x, wg, tid, j, r, e)


@pytest.mark.parametrize("n_inputs,bn", [(2, 128), (1, 256)])
def test_consumer_waits_and_releases_each_aux_stage_once(n_inputs, bn):
    from evt_backends.numba_cuda.codegen.frag_layout import FragLayout
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import _aux_ring_release, _aux_ring_wait
    p = _program(n_inputs)
    lay = FragLayout(p, bn, False, False, aux_ring=True)
    assert lay.aux_stages == 2
    for s0 in range(lay.stages):
        for ph in (0, 1):
            waits, arrives = [], []
            env = _run(_aux_ring_wait(lay), {"s": s0, "ph": ph, "bars": 0, "werr": 0,
                                             "mbar_wait": lambda bar, parity, *a: waits.append((bar // 8, parity))})
            expect = [((s0 + i) % lay.stages, ph ^ ((s0 + i) >= lay.stages)) for i in range(lay.aux_stages)]
            assert waits == expect
            # s, ph now name the next tile's first k-block position
            assert (env["s"], env["ph"]) == ((s0 + 2) % lay.stages, ph ^ ((s0 + 2) >= lay.stages))
            _run(_aux_ring_release(lay), {"tid": 0, "s_aux": s0, "bars": 0,
                                          "mbar_arrive": lambda bar: arrives.append(bar // 8 - lay.stages)})
            assert arrives == [slot for slot, _ in expect]


def test_select_takes_the_ring_for_16_bit_inputs_that_fit():
    from evt_backends.numba_cuda import select
    from evt_backends.numba_cuda.codegen.frag_layout import FragLayout
    assert select.sm90_aux_ring(_program(1), False)
    assert select.sm90_aux_ring(_program(2, np.dtype("float16")), False)
    assert not select.sm90_aux_ring(_program(1, np.float32), False)      # fp32: 256-byte panel rows
    assert not select.sm90_aux_ring(None, False)
    one = FragLayout(_program(1), 128, False, False, aux_ring=True)
    copied = FragLayout(_program(1), 128, False, False)
    assert one.stages > copied.stages      # the copies' buffers become ring slots
    assert sm90.ring_holds_aux(one.aux_stages, one.stages)


def test_wide_tile_ring_geometry():
    """128 x 256: a 48 KB stage holds six 8 KB panels, so one input's eight (two row halves x
    four column panels) take two ring positions, the second a third full (16 KB expected); the
    ring keeps three slots beside the 64 KB output staging. Two inputs would take three
    positions of a ring that then needs four: 4 x 48 + 64 KB, more than the 227 KB."""
    from evt_backends.numba_cuda import select
    from evt_backends.numba_cuda.codegen.frag_layout import FragLayout
    one = FragLayout(_program(1), 256, False, False, aux_ring=True)
    assert (one.aux_groups, one.aux_per_stage, one.aux_stages, one.stages) == (8, 6, 2, 3) and not one.recycles
    assert sm90.ring_holds_aux(one.aux_stages, one.stages) and one.fits
    _, _, expects, _, _ = _producer_loads(_program(1), one, 0)
    assert sorted(expects.values()) == [2 * sm90.PANEL_BYTES, 6 * sm90.PANEL_BYTES]
    two = FragLayout(_program(2), 256, False, False, aux_ring=True)
    assert (two.aux_stages, two.stages) == (3, 4) and two.fits and sm90.ring_holds_aux(3, 4) and two.recycles
    assert select.sm90_wide_tile_fits(_program(1), False, True, False, aux_ring=True)
    # two inputs fit beside recycled output panels (their GPU tests passed on the H200, 2026-12-07)
    assert select.sm90_wide_tile_fits(_program(2), False, True, False, aux_ring=True)
    assert not select.sm90_wide_tile_fits(_program(1), False, True, False)        # copied: 128-wide rows
