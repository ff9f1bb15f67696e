"""A second cut for packed paths whose conflicts no single edge separates (odd "spiders").

The path packing (`packing.py`) stops at the multicut LP's value or below, and trees grown
to pairwise-conflicting terminals (`packing._grow`) only lift it where the terminals form a
clique. The typical remaining gap on the benchmark's large graphs is an odd structure: three
conflict paths through a hub, each pair sharing an edge but no edge common to all three (a
hub with three arms, the conflicts joining arm ends pairwise). The LP pays 1/2 on each shared
edge (3/2), any plan needs 2 cuts. On random n=300 seed=1 every search state of a 10 s run
left unpruned one unit below the optimum had such an LP value of x.5.

Valid bound. Let H be a tree of undecided edges and m(H) the fewest edges of H that must be
cut so that no two conflicting vertices of H stay joined inside H (two conflicting vertices
joined by uncut edges would share a group). In every plan the cut edges of H number at least
m(H). If trees H_i carry flows f_i with sum over the trees through e of f_i <= capacity(e),
the undecided cut weight is >= sum_e cut_e * sum_{i: e in H_i} f_i >= sum_i f_i m(H_i).
A packed path is such a tree with m >= 1 counted once; it is worth 2 when the edge sets of
the tree paths between its conflicting vertex pairs have no edge in common (a single cut
edge would have to lie on every one of them), so growing it by residual arms until that
intersection is empty adds its flow (at most the arms' residual capacity) once more. Arms are
disjoint from the tree except at their first vertex, so the union stays a tree, and they use
only residual capacity, so the packing's other paths and trees keep theirs."""
from __future__ import annotations

from ..problem import bits

ARM_TRIES = 3                                     # first arms tried before a second one


def second_cuts(paths, conf, adj, cap, ends, need) -> int:
    """Extra bound from packed paths (edge ids from the far end, the start vertex, flow)
    that grow into spiders worth two cuts (module docstring), each for as much of its flow
    as the arms' residual capacity carries. `need`: stop once this much is found (None: no
    early stop)."""
    gained = 0
    for edges, start, f in paths:
        while f:
            g = _spider(edges, start, f, conf, adj, cap, ends)
            if not g:
                break
            gained += g
            f -= g
            if need is not None and gained >= need:
                return gained
    return gained


def _spider(edges, start, f, conf, adj, cap, ends) -> int:
    """Grow the path into a tree worth 2 with at most two residual arms; reserve and return
    the flow it carries (0: none found)."""
    tree = _Tree(start, edges, ends)
    common = tree.common(conf)
    if common is None:
        return 0
    if not common:                               # the path alone needs two cuts
        return f
    arms = _arms(tree, common, conf, adj, cap, ends)
    if arms[0] is not None:
        return _reserve(f, [arms[0]], cap)
    for arm in arms[1][:ARM_TRIES]:              # one arm that narrows the common edges
        bigger = tree.grown(arm, ends)
        inner = bigger.common(conf)
        if not inner:                            # conflicts inside the arm finished it
            return _reserve(f, [arm], cap)
        done, _ = _arms(bigger, inner, conf, adj, cap, ends)
        if done is not None:
            return _reserve(f, [arm, done], cap)
    return 0


def _reserve(f: int, arms, cap) -> int:
    g = min([f] + [cap[e] for arm in arms for e in arm[0]])
    for arm in arms:
        for e in arm[0]:
            cap[e] -= g
    return g


def _arms(tree, common, conf, adj, cap, ends):
    """Breadth-first over residual edges from the tree, never re-entering it: (the first arm
    that leaves no edge common to all conflict paths, or None; arms that only narrow them,
    shortest first). An arm is (edge ids from its far end, far end, attachment vertex)."""
    prev = {x: (-1, x) for x in tree.parent}
    queue = list(tree.parent)
    narrowing = []
    for x in queue:
        for y, e in adj[x]:
            if not cap[e] or y in prev:
                continue
            root = prev[x][1]
            prev[y] = (e, root)
            queue.append(y)
            hits = conf.get(y, 0) & tree.mask
            if not hits:
                continue
            arm = (_walk(prev, y, ends), y, root)
            left = common
            for t in bits(hits):
                left = left & tree.path(root, t)
            if not left:
                return arm, narrowing
            if left != common:
                narrowing.append(arm)
    return None, narrowing


def _walk(prev, y, ends) -> list:
    path, z = [], y
    while (e := prev[z][0]) >= 0:
        path.append(e)
        z ^= ends[e]
    return path


class _Tree:
    """A small tree of edge ids: parent pointers from an arbitrary root, for tree paths."""

    def __init__(self, start, edges, ends, base=None):
        if base is None:
            self.parent, self.depth, self.mask = {start: (None, -1)}, {start: 0}, 1 << start
            x = start
            for e in reversed(edges):            # edges run from the far end to `start`
                y = x ^ ends[e]
                self._add(y, x, e)
                x = y
        else:
            self.parent, self.depth, self.mask = dict(base.parent), dict(base.depth), base.mask

    def _add(self, child, parent, e) -> None:
        self.parent[child] = (parent, e)
        self.depth[child] = self.depth[parent] + 1
        self.mask |= 1 << child

    def grown(self, arm, ends) -> "_Tree":
        path, _, root = arm
        out = _Tree(None, None, None, self)
        x = root
        for e in reversed(path):
            y = x ^ ends[e]
            out._add(y, x, e)
            x = y
        return out

    def path(self, a: int, b: int) -> int:
        """Mask of the edge ids on the tree path a - b."""
        out, par, dep = 0, self.parent, self.depth
        while a != b:
            if dep[a] < dep[b]:
                a, b = b, a
            p, e = par[a]
            out |= 1 << e
            a = p
        return out

    def common(self, conf):
        """Mask of the edges on every tree path between two conflicting vertices of the
        tree; None when no two of them conflict."""
        out = None
        for x in self.parent:
            for t in bits(conf.get(x, 0) & self.mask):
                if t > x:
                    p = self.path(x, t)
                    out = p if out is None else out & p
        return out
