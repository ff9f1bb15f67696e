"""CPU checks of the cupy backend's overlapped cooperative schedule (TileConfig(overlap=True),
codegen/sm90_overlap.py): which kinds take it and why others do not (a forced tile falls back
to the cooperative schedule, reported), the piece structure and ring invariant of the generated
source, and nvcc builds for sm_90a whose SASS keeps each piece's arithmetic under a wgmma group.
Results on a GPU: tests/gpu/test_cupy_overlap.py."""
import dataclasses
import re

import pytest

from bench import programs as P
from bench.nvcc_check import build, find_tool, work_under_wgmma
from evt_backends.cupy.codegen import sm90_overlap as so
from evt_backends.cupy.codegen.plan import TileConfig
from evt_backends.cupy.codegen.sm90_io import aux_stages
from evt_backends.cupy.select import candidates, fit_stages, generate, overlap_refusal, tiles
from evt_backends.gpu import overlap
from evt_core.errors import UnsupportedError

from .helpers import canonical_spec, default_spec
from .overlap_kinds import KINDS, tree

OV = TileConfig(128, 128, 64, stages=6, overlap=True)


def _kind(name, L=1, **spec_changes):
    p = tree(name, L=L)[0].program
    spec = dataclasses.replace(default_spec(p, L=L), **spec_changes)
    return p, spec, fit_stages(p, spec, OV)


def test_label_says_overlap_and_the_default_is_off():
    assert OV.label() == "128x128x64/w2x4/s6/ov"
    assert TileConfig(128, 128, 64, stages=6).label() == "128x128x64/w2x4/s6"
    assert not TileConfig(128, 128, 64).overlap


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_of_the_cooperative_128_tile_takes_it(name):
    p, spec, cfg = _kind(name)
    assert overlap_refusal(p, spec, cfg) is None and cfg.overlap
    assert "(overlapped cooperative)" in generate(p, spec, cfg)


@pytest.mark.parametrize("change,why", [
    (lambda p, s, c: (canonical_spec(p, "float16", "sm80"), c), "sm80 mainloop"),
    (lambda p, s, c: (s, dataclasses.replace(c, pingpong=True)), "ping-pong"),
    (lambda p, s, c: (s, dataclasses.replace(c, bn=256)), "a 128 x 256 tile (two sets of 128 accumulators"),
    (lambda p, s, c: (dataclasses.replace(s, split_k=4, aux_tma=()), c), "split_k=4"),
    (lambda p, s, c: (dataclasses.replace(s, aux_ring=False), c), "a buffer of their own"),
], ids=["sm80", "pingpong", "wide", "split_k", "aux_buffer"])
def test_refused_kinds_say_why_and_never_generate(change, why):
    p, spec, cfg = _kind("gelu_backward")
    spec, cfg = change(p, spec, cfg)
    got = overlap_refusal(p, spec, cfg)
    assert got and why in got, got
    with pytest.raises(UnsupportedError, match=re.escape(why)):
        generate(p, spec, cfg)


class _Runner:
    """CupyRunner's forced-tile path with its build replaced by the (spec, tile) it would build."""

    def __init__(self, program, tile):
        from evt_backends.cupy.backend import CupyBackend
        from evt_backends.cupy.runner import CupyRunner
        self.runner = CupyRunner(program, {**CupyBackend.options, "tile": tile})
        self.runner._build = lambda spec, cfg: (spec, cfg)

    def forced(self, spec):
        report = []
        return self.runner._forced_tile(spec, report), report


def test_forced_overlap_runs_cooperative_where_refused_and_says_why():
    p, spec, _ = _kind("gelu_backward")
    (got_spec, cfg), report = _Runner(p, OV).forced(dataclasses.replace(spec, aux_ring=False))
    assert not cfg.overlap and (cfg.bm, cfg.bn, cfg.pingpong) == (128, 128, False)
    assert len(report) == 1 and "overlap=True not taken" in report[0] and "buffer of their own" in report[0], report
    assert "(overlapped cooperative)" not in generate(p, got_spec, cfg)
    (_, cfg), report = _Runner(p, OV).forced(spec)
    assert cfg.overlap and not report


def test_not_a_default_candidate_and_one_line_away_from_it(monkeypatch):
    """Without the call's K the candidates hold no overlapped tile (on the H200 it measured
    slower at K >= 768, 2026-12-07); adding one to select.tiles is enough, since candidates
    drops it wherever the kind refuses it."""
    from evt_backends.cupy import select
    p, spec, _ = _kind("gelu_backward")
    assert not any(c.overlap for c in tiles(spec)) and not any(c.overlap for c in candidates(p, spec))
    monkeypatch.setattr(select, "tiles", lambda s, t=select.tiles: t(s) + [TileConfig(128, 128, 64, stages=6,
                                                                                         overlap=True)])
    assert any(c.overlap for c in select.candidates(p, spec))
    assert not any(c.overlap for c in select.candidates(p, dataclasses.replace(spec, aux_ring=False)))
    assert not any(c.overlap for c in select.candidates(p, dataclasses.replace(spec, split_k=2, aux_tma=())))


@pytest.mark.parametrize("prog,K,want", [
    (P.w2_backward, 256, True), (P.w2_backward, 512, True), (P.w2_backward, 768, False),
    (P.w4_layernorm_stats, 256, False), (P.w1_forward, 256, False)])
def test_autotuner_times_it_where_the_shared_rule_says_it_pays(prog, K, want):
    """With the call's K, the overlapped tiles join the candidates where backends/gpu/overlap.pays
    holds (short K, (M, N) inputs through the ring, no row sums); without K, never."""
    p = prog()
    spec = default_spec(p, K=K)
    assert any(c.overlap for c in candidates(p, spec, K)) is want
    assert not any(c.overlap for c in candidates(p, spec))
    assert not any(c.overlap for c in candidates(p, dataclasses.replace(spec, aux_ring=False), K))


@pytest.mark.parametrize("inputs", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("stages", [2, 3, 4, 5, 6, 7])
def test_shared_ring_arithmetic_never_waits_on_a_k_block_the_ring_cannot_hold(inputs, stages):
    """gpu/overlap.py: one or two 16-bit ring inputs are read whole (32 words a thread each) and
    released by the first piece, so all 8 pieces may wait; more are held to the last piece and
    the pieces are cut to stages - aux stages; either way the invariant holds wherever the
    ring keeps a stage beside a tile's aux stages."""
    for aux in range(0 if not inputs else 1, stages):
        n = overlap.pieces(inputs, 128, stages, aux if inputs else 0)
        early = overlap.preloaded(inputs, 128)
        assert early == (1 <= inputs <= 2) and overlap.preload_words(inputs, 128) == 32 * inputs
        assert 1 <= n <= overlap.PIECES and (n == overlap.PIECES or not early)
        assert overlap.ring_admits(n, stages, aux if inputs else 0, early)


@pytest.mark.parametrize("n", range(1, 17))
def test_pieces_take_every_column_group_once_in_order(n):
    got = [overlap.piece_of_group(j, 16, n) for j in range(16)]
    assert got == sorted(got) and set(got) == set(range(n))


def _lines(src):
    return [x.strip() for x in src.split("for (; t < a.tiles; t += gridDim.x) {")[1].splitlines()]


def _pieces(lines):
    return [i for i, x in enumerate(lines) if x.startswith("// -- piece ")]


@pytest.mark.parametrize("name,L", [(n, 1) for n in sorted(KINDS)] + [("ln_backward", 3), ("reductions", 2)])
def test_pieces_hold_each_column_group_once_beside_one_k_block_each(name, L):
    p, spec, cfg = _kind(name, L)
    n = so.pieces(spec, cfg)
    lines = _lines(generate(p, spec, cfg))
    marks = _pieces(lines)
    assert len(marks) == n
    groups = [int(m.group(1)) for x in lines for m in [re.match(r"\{ const int (?:jj = \d+, )?j = (\d+);", x)] if m]
    assert groups == list(range(16))                    # every column group once, in order
    for a, b in zip(marks, marks[1:] + [len(lines)]):   # each piece: one issue before its groups, one retire after
        body = lines[a:b]
        assert body[1] == "go = more && kb < KB;" and body[2] == "if (go) evt_kb_issue(dn, sbase, bars, s, ph, wg, kb);"
        assert sum("evt_kb_retire" in x for x in body) == 1 + (b == len(lines))    # (+ the remaining k-loop's)
    last = lines[marks[-1]:]
    drain = next(i for i, x in enumerate(last) if x.startswith("evt_kb_drain(dn"))
    assert not last[drain - 1].startswith("if")       # the drain on every path, not under `if (more)`
    assert last[drain + 2] == "for (int i = 0; i < 64; ++i) d[i] = dn[i];"


@pytest.mark.parametrize("name", sorted(KINDS))
def test_ring_invariant_in_the_source(name):
    """Where the tile's aux stages go back: with one or two ring inputs in piece 0, after its
    k-block's issue and its reads of every ring word, before its first column group; with
    three, after the last piece's retirement and before the rest of the next tile's k-loop, the
    pieces no more than the ring fills beside them. Every ring position is waited on in order:
    the tile's aux stages at the top, before any k-block of the next tile."""
    p, spec, cfg = _kind(name)
    lines = _lines(generate(p, spec, cfg))
    marks, n, A = _pieces(lines), so.pieces(spec, cfg), aux_stages(spec, cfg)
    release = [i for i, x in enumerate(lines) if "(s_aux + i) % " in x and "evt_mbar_arrive" in x]
    first_group = next(i for i, x in enumerate(lines) if "evt_epilogue(" in x)
    if not A:
        assert not release and "s_aux" not in "\n".join(lines)
        return
    wait = next(i for i, x in enumerate(lines) if x.startswith("const int s_aux = s;"))
    assert wait < marks[0] and lines[wait + 6].startswith("s += ") and len(release) == 1
    if so.preloaded(spec, cfg):
        reads = [i for i, x in enumerate(lines) if x.startswith("xw[") and "evt_lds_u32(" in x]
        assert len(reads) == len(spec.aux_tma) and marks[0] + 2 < min(reads) < release[0] < first_group < marks[1]
        assert n == overlap.PIECES
    else:
        rest = next(i for i, x in enumerate(lines) if x.startswith("for (; kb < KB; ++kb)"))
        assert len(spec.aux_tma) == 3 and n == cfg.stages - A and marks[-1] < release[0] < rest


def test_tile_vectors_are_handed_to_the_next_tile_after_the_first_piece():
    """The tile's bias goes to shared memory before piece 0's column groups; only after piece 0
    do its registers take the next tile's (guarded: the CTA may have none), loaded from the next
    tile's coordinates; the first tile's are loaded before its mainloop."""
    p, spec, cfg = _kind("ffn_forward")
    src = generate(p, spec, cfg)
    first = src.split("the CTA's first tile")[1].split("for (; t < a.tiles")[0]
    assert first.index("tv0[i] = ") < first.index("evt_kb_issue(d,")
    lines = _lines(src)
    marks = _pieces(lines)
    store = next(i for i, x in enumerate(lines) if "evt_sts_u16(vs + " in x)
    guard = next(i for i, x in enumerate(lines) if x.startswith("if (more) {"))
    load = next(i for i, x in enumerate(lines) if "tv0[i] = " in x)
    assert store < marks[0] < guard < load < marks[1]
    assert lines[guard + 1] == "const int l = ln, m0 = mtn * 128, n0 = ntn * 128;"
    assert lines.index("l = ln; mt = mtn; nt = ntn;") > lines.index("for (int i = 0; i < 64; ++i) d[i] = dn[i];")


def test_each_tiles_first_k_block_starts_from_zero():
    """scale-d 0 on the first k16 step of every tile's first k-block (kb == 0), in both sets."""
    p, spec, cfg = _kind("bare")
    src = generate(p, spec, cfg)
    assert "(kb > 0 || k > 0) ? 1 : 0" in src and src.count("evt_kb_issue(d, ") == 1
    assert "for (kb = 0; kb < KB; ++kb)" in src and "kb = 0;" in _lines(src)


# ---- nvcc for sm_90a: no local memory, and each piece's arithmetic under its wgmma group ----
NVCC = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")

# (kind, batch, the least epilogue work (fp32, conversion and shared-memory instructions) a piece
# puts between its wgmma group's issue and its wait)
SASS_KINDS = [("gelu_backward", 1, 150), ("ffn_forward", 1, 100), ("ln_backward", 1, 40), ("bare", 1, 8),
              ("three_inputs", 1, 100), ("reductions", 2, 30)]


@pytest.fixture(scope="module")
def builds():
    return {}


def _build(builds, name, L, ov):
    key = (name, L, ov)
    if key not in builds:
        p, spec, cfg = _kind(name, L)
        cfg = cfg if ov else dataclasses.replace(cfg, overlap=False)
        builds[key] = (spec, cfg, build(generate(p, spec, cfg)))
    return builds[key]


@NVCC
@pytest.mark.parametrize("name,L,least", SASS_KINDS, ids=[k[0] for k in SASS_KINDS])
def test_overlapped_kernel_builds_clean_with_its_pieces_under_the_tensor_cores(builds, name, L, least):
    spec, cfg, rep = _build(builds, name, L, True)
    assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), rep
    assert not [w for w in rep.warnings if "C75" in w or "wgmma" in w.lower()], rep.warnings
    if not rep.sass:
        pytest.skip("cuobjdump not found: resource checks only")
    n = so.pieces(spec, cfg)
    assert rep.sass["LDL"] == rep.sass["STL"] == 0 and rep.sass["MEMBAR.ALL.GPU"] == 0, rep.sass
    # 4 k16 steps each: the first tile's k-loop, one group per piece, the rest of the next tile's
    assert rep.sass["HGMMA"] == 4 * (n + 2), rep.sass
    assert rep.sass["UTMALDG"] >= 2 + len(spec.aux_tma) and rep.sass["UTMASTG"] >= 2, rep.sass
    work = work_under_wgmma(rep.listing)
    assert sum(w >= least for w in work) == n, work
    assert work[0] == work[-1] == 0, work       # the k-loops alone: their wait right after the issue
    _, _, coop = _build(builds, name, L, False)
    assert max(work_under_wgmma(coop.listing)) == 0          # the cooperative kernel waits at once


@NVCC
def test_fp32_output_without_staging_builds_clean():
    """No TMA-stored output (an fp32 result stored per pair): the pieces are the column groups
    alone, no panel scopes."""
    p, spec, cfg = _kind("fp32_row_max")
    assert spec.tma_out < 0
    rep = build(generate(p, spec, cfg))
    assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), rep
    if rep.sass:
        assert rep.sass["LDL"] == rep.sass["STL"] == 0 and rep.sass["HGMMA"] == 4 * (overlap.PIECES + 2)


@pytest.mark.parametrize("cfg", [OV, TileConfig(64, 256, 64, stages=4, pingpong=True),
                                 TileConfig(128, 256, 64, stages=4, group_m=16), TileConfig(128, 128, 32, 4, 2)],
                         ids=lambda c: c.label())
def test_a_label_reads_back_as_its_tile(cfg):
    assert TileConfig.from_label(cfg.label()) == cfg


def test_tile_option_takes_a_label_and_names_a_bad_one():
    """(The backend checks its own option values; cupy itself is not needed for that.)"""
    from evt_backends.cupy.backend import CupyBackend
    t = tree("bare")[0]
    k = CupyBackend().compile(t, {"tile": "128x128x64/s6/ov"})
    assert k.run.options["tile"] == OV
    with pytest.raises(UnsupportedError, match=r"tile='128x128/s6'.*BMxBNxBK"):
        CupyBackend().compile(t, {"tile": "128x128/s6"})
    with pytest.raises(UnsupportedError, match=r"unknown part 'ov2'"):
        CupyBackend().compile(t, {"tile": "128x128x64/ov2"})
