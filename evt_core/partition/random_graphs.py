"""Random, well-typed training-like DAGs for property tests and the benchmark: GEMMs, softmax
anchors, elementwise chains, row reductions, transposes feeding GEMMs, opaque ops, and long
"forward-to-backward" edges from early nodes to late ones."""
from __future__ import annotations

import random

from .graph import Graph

_UNARY = ("relu", "gelu", "tanh", "exp", "neg", "sigmoid")
_BINARY = ("add", "mul", "sub")


def random_graph(rng: random.Random, n: int, m: int = 64, p_anchor: float = 0.15,
                 p_reduce: float = 0.1, p_opaque: float = 0.02, p_far: float = 0.25,
                 p_multi: float = 0.0) -> Graph:
    """A graph of `n` compute nodes over (m, m) tensors (reductions give (m, 1) columns).
    With p_multi > 0 it also holds layer norms (three outputs), read both directly (output 0)
    and through getitem; at p_multi = 0 the graphs of a seed are those of earlier versions."""
    g = Graph()
    full = [g.input("x0", (m, m), "float16"), g.input("x1", (m, m), "float16")]
    cols = [g.input("c0", (m, 1), "float32")]

    def pick(pool):
        # Mostly recent values (chains), sometimes any earlier one (saved activations).
        if rng.random() < p_far:
            return rng.choice(pool)
        return rng.choice(pool[-3:])

    for _ in range(n):
        r = rng.random()
        if r < p_anchor:
            if rng.random() < 0.7:
                a, b = pick(full), pick(full)
                if rng.random() < 0.3:
                    a = g.add("t", a)
                    full.append(a)
                    if len(g.compute_nodes()) >= n:
                        break
                full.append(g.add("mm", a, b))
            else:
                full.append(g.add("softmax", pick(full), -1))
        elif r < p_anchor + p_reduce:
            cols.append(g.add("sum", pick(full), [1], True))
        elif r < p_anchor + p_reduce + p_opaque:
            full.append(g.add("custom_op", pick(full), shape=(m, m), dtype="float16"))
        elif r < p_anchor + p_reduce + p_opaque + p_multi:
            ln = g.add("layer_norm", pick(full), [m], None, None, 1e-5)
            full.append(ln if rng.random() < 0.5 else g.add("getitem", ln, 0))
            if len(g.compute_nodes()) < n:
                cols.append(g.add("getitem", ln, rng.choice((1, 2))))
        elif rng.random() < 0.5:
            full.append(g.add(rng.choice(_UNARY), pick(full)))
        else:
            other = pick(cols) if rng.random() < 0.3 else pick(full)
            full.append(g.add(rng.choice(_BINARY), pick(full), other))
        if len(g.compute_nodes()) >= n:
            break
    users = g.users()
    g.output(*[v for v in g.compute_nodes() if not users[v]])
    return g
