"""The tree IR under stress: constants that == conflates (signed zeros, NaN), trees through
pickle and deepcopy, and epilogues far deeper than Python's recursion limit."""
import copy
import pickle

import numpy as np

import evt_core
from evt_core import ops
from evt_core.tree.ir import Node
from evt_core.tree.ops import Op
from tests.core.helpers import empty, ints

M, N, K = 4, 6, 3


def examples(*outputs, shape=(M, N)):
    return {"accum": empty((M, N)), **{o: empty(shape) for o in outputs}}


def both(tree, A, B, **inputs):
    """interpret and the numpy backend, which must agree exactly."""
    ref = evt_core.interpret(tree, A, B, **inputs)
    got = evt_core.compile(tree, "numpy")(A, B, **inputs)
    for name in ref:
        np.testing.assert_array_equal(np.asarray(got[name]), ref[name])
    return ref


# ---- constants compare by their bits ------------------------------------------------------

def test_signed_zero_constants_are_different_values():
    A, B = np.ones((M, K), np.float16), np.ones((K, N), np.float16)      # accum = 3 everywhere
    tree = evt_core.trace(lambda accum: {"D": 1.0 / (accum * 0.0), "E": 1.0 / (accum * -0.0)},
                          examples("D", "E"))
    out = both(tree, A, B)
    assert (out["D"] == np.inf).all() and (out["E"] == -np.inf).all()


def test_folded_signed_zeros_are_different_values():
    # constant folding makes 0.0 and -0.0 out of all-constant ops; they must not merge either
    A, B = np.ones((M, K), np.float16), np.ones((K, N), np.float16)
    tree = evt_core.trace(lambda accum: {"D": 1.0 / (accum * ops.maximum(0.0, -1.0)),
                                         "E": 1.0 / (accum * ops.minimum(-0.0, 1.0))}, examples("D", "E"))
    out = both(tree, A, B)
    assert (out["D"] == np.inf).all() and (out["E"] == -np.inf).all()


def test_constant_nodes_compare_by_bits():
    def const(v):
        return Node(Op.CONST, arg=v)
    assert const(0.0) != const(-0.0)
    assert len({const(0.0), const(-0.0)}) == 2
    nan = float("nan")
    assert const(nan) == const(float("nan")) and hash(const(nan)) == hash(const(float("nan")))
    assert const(nan) != const(-nan)                       # another sign bit, another constant
    assert const(1) == const(1.0) == const(np.float32(1.0))
    # and so does every node above them
    x = Node(Op.ACCUM, shape=(M, N))
    assert Node(Op.MUL, (x, const(0.0)), shape=(M, N)) != Node(Op.MUL, (x, const(-0.0)), shape=(M, N))


# ---- pickle and deepcopy ------------------------------------------------------------------

def _rich_tree():
    """Shared values (TOPO bodies after dag_to_tree), a reduction, a layout op, an input."""
    def epi(accum, C):
        h = ops.relu(accum * 0.5 + C)
        return {"D": h * h - 1.0, "S": ops.sum(h, over="M"), "T": ops.permute(accum + C, (1, 0))}
    ex = {"accum": empty((M, N)), "C": empty((M, N)), "D": empty((M, N)), "S": empty((N,)), "T": empty((N, M))}
    return evt_core.trace(epi, ex)


def test_tree_round_trips_through_pickle_and_deepcopy():
    tree = _rich_tree()
    assert any(n.op is Op.TOPO for n in tree.nodes())
    A, B, C = ints((M, K)), ints((K, N)), ints((M, N), np.float32)
    want = both(tree, A, B, C=C)
    for again in (pickle.loads(pickle.dumps(tree)), copy.deepcopy(tree)):
        assert again == tree and again.program == tree.program
        assert again.program.key() == tree.program.key()
        got = both(again, A, B, C=C)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


def test_pickled_node_keeps_shared_operands_shared():
    x = Node(Op.ACCUM, shape=(M, N))
    y = Node(Op.EXP, (x,), shape=(M, N))
    z = pickle.loads(pickle.dumps(Node(Op.ADD, (y, y), shape=(M, N))))
    assert z.src[0] is z.src[1] and z == Node(Op.ADD, (y, y), shape=(M, N))


# ---- trees deeper than the recursion limit ------------------------------------------------

DEPTH = 2000                               # twice Python's default recursion limit


def _chain(step, depth=DEPTH):
    def epi(accum):
        x = accum
        for _ in range(depth):
            x = step(x)
        return {"D": x}
    return epi


def test_deep_chain_traces_interprets_and_compiles():
    A, B = ints((M, K)), ints((K, N))
    tree = evt_core.trace(_chain(lambda x: x * 0.5 + 0.25), examples("D"))
    want = np.matmul(A.astype(np.float32), B.astype(np.float32))
    for _ in range(DEPTH):                 # the same fp32 ops in the same order
        want = want * np.float32(0.5) + np.float32(0.25)
    np.testing.assert_array_equal(both(tree, A, B)["D"], want)


def test_deep_chain_with_layout_ops():
    # permute on every step: layout elimination walks the whole chain
    A, B = ints((M, K)), ints((K, N))
    tree = evt_core.trace(_chain(lambda x: ops.permute(x, (1, 0)) + 1.0), examples("D"))
    want = np.matmul(A.astype(np.float32), B.astype(np.float32)) + np.float32(DEPTH)
    np.testing.assert_array_equal(both(tree, A, B)["D"], want)


def test_deep_chain_of_shared_values():
    # every value used twice: dag_to_tree folds the chain into topological visitors
    A, B = ints((M, K)), ints((K, N))
    tree = evt_core.trace(_chain(lambda x: ops.maximum(x, x * 0.5)), examples("D"))
    assert any(n.op is Op.TOPO for n in tree.nodes())
    want = np.matmul(A.astype(np.float32), B.astype(np.float32))
    for _ in range(DEPTH):
        want = np.maximum(want, want * np.float32(0.5))
    np.testing.assert_array_equal(both(tree, A, B)["D"], want)


def test_deep_tree_round_trips_through_pickle_and_deepcopy():
    tree = evt_core.trace(_chain(lambda x: x * 0.5 + 0.25), examples("D"))
    for again in (pickle.loads(pickle.dumps(tree)), copy.deepcopy(tree)):
        assert again == tree and again.program.key() == tree.program.key()


def test_squaring_chain_is_not_exponential():
    # x * x uses x twice; a walk that does not memoise shared values takes 2**depth steps
    A, B = np.full((M, K), 0.25, np.float16), np.full((K, N), 0.25, np.float16)
    depth = 60
    tree = evt_core.trace(_chain(lambda x: x * x + 0.25, depth), examples("D"))
    want = np.matmul(A.astype(np.float32), B.astype(np.float32))
    for _ in range(depth):
        want = want * want + np.float32(0.25)
    np.testing.assert_array_equal(both(tree, A, B)["D"], want)



def test_a_kernel_pickles_as_its_tree_backend_and_options():
    """A compiled kernel went to another process as a bare AttributeError (its backend's
    closure); it now pickles as what compiles it again."""
    import pickle

    import numpy as np

    import evt_core
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    tree = evt_core.trace(lambda accum, bias: {"D": evt_core.ops.relu(accum + bias)},
                          {"accum": np.empty((8, 6), np.float32), "bias": bias, "D": np.empty((8, 6), np.float16)})
    kernel = evt_core.compile(tree, backend="numpy")
    again = pickle.loads(pickle.dumps(kernel))
    assert again.backend == "numpy" and again.options == kernel.options
    assert np.array_equal(again(A, B, bias=bias)["D"], kernel(A, B, bias=bias)["D"])


def test_the_tree_walker_evaluates_a_deep_chain():
    """The reference walker (the independent side of properties/test_program_eval.py)
    recursed once per level as well."""
    from evt_core.interpreter.reference import interpret as walk
    A, B = ints((M, K)), ints((K, N))
    tree = evt_core.trace(_chain(lambda x: x * 0.5 + 0.25), examples("D"))
    np.testing.assert_array_equal(walk(tree, A, B)["D"], evt_core.interpret(tree, A, B)["D"])
