"""The record every graph-level ATen op has, and the registry that holds them.

One `OpDef` per op says everything the graph level knows about it: its node class for the
partitioner, its signature, its shape and dtype rule, its NumPy semantics, and how it becomes
a node of an evt_core epilogue tree. Every field is required, so an op cannot be half
registered (tests/partition/test_registry.py checks each one)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Union


class Kind(Enum):
    INPUT = "input"          # graph input; not partitioned
    CONST = "const"          # compile-time constant; not partitioned
    ANCHOR = "anchor"        # a mainloop (GEMM, conv, softmax, layer norm): at most one per group
    ELEMENTWISE = "elementwise"  # fusible, including layout ops
    REDUCTION = "reduction"  # fusible, but its result is complete only outside its group
    OPAQUE = "opaque"        # unknown or library op: a group of its own


class Unfusible(Exception):
    """A node the epilogue tree cannot express; the message says which and why."""


# tree(node, args, ctx) -> traced value. args: one traced value or Python float per operand;
# ctx.rank: the accumulator's rank. A str instead says why the op never becomes a tree node.
TreeRule = Union[Callable, str]


@dataclass(frozen=True, slots=True)
class OpDef:
    name: str                # the ATen name nodes carry
    kind: Kind
    sig: tuple[str, ...]     # parameter names; attributes end with ':'
    infer: Callable          # (types: {param: TensorType}, attrs) -> tuple of output TensorTypes
    impl: Callable           # NumPy: (**operands as float32/int arrays, **attrs) -> array or tuple
    tree: TreeRule
    defaults: dict           # attribute values filled in when the caller leaves them out
    aliases: tuple[str, ...]  # other spellings accepted by Graph.add (JSON keeps the one used)

    @property
    def tensor_params(self) -> tuple[str, ...]:
        return tuple(p for p in self.sig if not p.endswith(":"))


REGISTRY: dict[str, OpDef] = {}


def op(name, kind, sig, infer, impl, tree, defaults=None, aliases=()) -> None:
    """Register one op. Invariant: names and aliases are unique across the registry."""
    assert name not in REGISTRY, name
    REGISTRY[name] = OpDef(name, kind, tuple(sig.split()), infer, impl, tree, dict(defaults or {}),
                           tuple(aliases))
