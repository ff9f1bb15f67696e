"""Which node pairs may share a group, derived once from the op classes (design doc 5.1/5.2).

An edge u->v is *possibly internal* unless a rule forbids it outright: v is an anchor and the
edge is not a permute/transpose feeding a GEMM (epilogue-only fusion), u is a reduction (its
result is complete only after the group), or either end is opaque. Convexity adds more: if u
and c share a group, every node on every path u ~> c does too, so a forbidden edge anywhere on
such a path forbids the pair (u, c). `prune_edges` applies that to edges to a fixpoint."""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .graph import Graph
from .optable import GEMMS, LAYOUT_INTO_GEMM, RESHAPING, Kind


def ever_internal(g: Graph, u: str, v: str) -> bool:
    """May edge u->v lie inside a group in some legal plan, judged by the two ends alone?"""
    a, b = g.nodes[u], g.nodes[v]
    if Kind.OPAQUE in (a.kind, b.kind) or a.kind is Kind.REDUCTION:
        return False
    if b.kind is Kind.ANCHOR:
        return a.op in LAYOUT_INTO_GEMM and b.op in GEMMS
    return True


def fits_frame(shape, frame) -> bool:
    """May a computing elementwise node of this shape (optable.RESHAPING ops are exempt: an
    operand layout, a column split's select) sit in the epilogue of a GEMM whose output is
    `frame`? Yes when it has the frame's element count (the frame itself, or a view or permute
    of it) or broadcasts onto it (a row or column vector, a scalar). A smaller value of another
    shape (the (N2,) bias gradient of another layer) has no place in the epilogue's frame."""
    if prod(shape) == prod(frame):
        return True
    if len(shape) > len(frame):
        return False
    return all(a in (1, b) for a, b in zip(reversed(shape), reversed(frame)))


def off_frame(g: Graph, anchor: str, name: str) -> bool:
    """True when node `name` may not share a group with `anchor`: the anchor is a GEMM and the
    node computes elementwise on a value that does not fit its output (`fits_frame`)."""
    a, n = g.nodes[anchor], g.nodes[name]
    return (a.op in GEMMS and n.kind is Kind.ELEMENTWISE and n.op not in RESHAPING
            and not fits_frame(n.shape, a.shape))


@dataclass(frozen=True)
class Stages:
    """When each node's value can exist, in a graph whose inputs carry a `stage` attribute (0
    unless set): a joint training graph's output gradients are stage 1, which exists only once
    the forward half has run. `half`: the stage that computes the node, the later of the
    stage of the inputs it depends on and the earliest stage of the outputs that need it (a
    gradient computed from forward values alone still runs in the backward). `recomputable`:
    nodes of an earlier half that a later one can recompute, because every value they read is
    handed to it (read there anyway, so saved), recomputable or a constant (layer norm's
    normalised value from the saved input and statistics)."""
    stage: dict
    half: dict
    recomputable: frozenset


def stages(g: Graph) -> Stages:
    stage: dict[str, int] = {}
    for name, node in g.nodes.items():        # topological order
        own = node.attr("stage", 0) if node.kind is Kind.INPUT else 0
        stage[name] = max([own, *(stage[u] for u in node.inputs)])
    needed = {n: stage[n] for n in g.outputs}
    for name in reversed(list(g.nodes)):
        if name in needed:
            for u in g.nodes[name].inputs:
                needed[u] = min(needed.get(u, needed[name]), needed[name])
    half = {n: max(stage[n], needed.get(n, stage[n])) for n in g.nodes}
    handed = {u for name, node in g.nodes.items() for u in node.inputs if half[u] < half[name]}
    recomputable: set[str] = set()
    for name, node in g.nodes.items():
        if node.kind not in (Kind.INPUT, Kind.ANCHOR, Kind.OPAQUE) and all(
                u in handed or u in recomputable or g.nodes[u].kind is Kind.CONST for u in node.inputs):
            recomputable.add(name)
    return Stages(stage, half, frozenset(recomputable))


def stage_conflict(st: Stages, anchor: str, name: str) -> bool:
    """True when node `name` may not share a group with `anchor`, whose kernel runs in the
    anchor's half: a node that depends on a later stage cannot run there (a forward GEMM's
    epilogue cannot take a backward op that reads the output gradients), nor a node of an
    earlier half that the later one cannot recompute (a GELU of a pre-activation nobody saved).
    A tangent-free node of a later half may join a forward kernel: torch/uturn.py moves it
    into the forward (the loss gradient in the U-turn)."""
    h = st.half[anchor]
    return st.stage[name] > h or (st.half[name] < h and name not in st.recomputable)


def absorbed_layout_producers(g: Graph, p: str, users) -> list[tuple[str, str]]:
    """Pairs (u, gemm) that may not share a group: a permute p feeding a GEMM in its group is
    an operand layout, so p's own producer u would be fused *before* the mainloop."""
    node = g.nodes[p]
    if node.op not in LAYOUT_INTO_GEMM:
        return []
    gemms = [c for c in users[p] if g.nodes[c].op in GEMMS]
    prods = [u for u in node.inputs if g.nodes[u].kind not in (Kind.INPUT, Kind.CONST)]
    return [(u, m) for u in prods for m in gemms]


class Reach:
    """Ancestor/descendant bitsets over the compute nodes (bit i = topological index i).
    O(N*E/wordsize) to build; every later convexity test is a mask operation."""

    def __init__(self, g: Graph):
        self.names = g.compute_nodes()
        self.index = {n: i for i, n in enumerate(self.names)}
        self.preds = [[self.index[u] for u in dict.fromkeys(g.nodes[n].inputs) if u in self.index]
                      for n in self.names]
        self.succs = [[] for _ in self.names]
        for v, ps in enumerate(self.preds):
            for u in ps:
                self.succs[u].append(v)
        self.anc = [0] * len(self.names)
        for v, ps in enumerate(self.preds):
            m = 1 << v
            for u in ps:
                m |= self.anc[u]
            self.anc[v] = m
        self.desc = [0] * len(self.names)
        for u in reversed(range(len(self.names))):
            m = 1 << u
            for v in self.succs[u]:
                m |= self.desc[v]
            self.desc[u] = m


def prune_edges(g: Graph, r: Reach) -> set[tuple[int, int]]:
    """Postcondition: the returned edges (u, v) are exactly those that may be internal to a
    group: allowed by `ever_internal` and with no forbidden edge on any path u ~> v."""
    keep = {(u, v) for v, ps in enumerate(r.preds) for u in ps
            if ever_internal(g, r.names[u], r.names[v])}
    while True:
        # tails[c]: tails of forbidden edges lying on some path into c. O(E) bigint ors.
        tails = [0] * len(r.names)
        for v, ps in enumerate(r.preds):
            for u in ps:
                tails[v] |= tails[u] | (0 if (u, v) in keep else 1 << u)
        bad = {(u, v) for (u, v) in keep if r.desc[u] & tails[v]}
        if not bad:
            return keep
        keep -= bad
