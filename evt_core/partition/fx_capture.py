"""Capture the joint forward+backward ATen graph of a torch model and import it (`from_fx`).
Needs PyTorch (imported lazily, so `evt_core.partition` stays torch-free).

    imp = import_module(model, lambda y: y.sum(), x)     # JointImport
    plan = P.partition(P.run_pipeline(imp.graph))
    P.evaluate(imp.graph, imp.inputs, impls=torch_impls())  # == imp.reference()

How: `aot_function` traces forward and backward into one fx graph and hands it to the
partition_fn, which we wrap to keep it (then defer to the default partitioner, so the call
still runs). Attention is traced with the math SDPA backend: its bmm/softmax decomposition is
what the partitioner can fuse, where the fused CPU kernel would be one opaque node."""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from .errors import check
from .fx_import import _DEVICE, _DTYPE, _MISC, _TENSOR, from_fx, fx_output_positions
from .graph import Graph


@dataclass
class JointImport:
    """graph: the imported joint graph. gm: the fx joint graph it came from, called as
    gm(primals, tangents). primals/tangents: the example tensors of the capture (parameters
    first, then buffers, then inputs and targets). inputs: the same as {IR input name:
    ndarray} for `evaluate`/`run`. positions: for each IR output, its index in gm's flat
    outputs, which are: updated buffers, forward outputs, then one gradient (or None) per
    primal. n_params: how many leading primals are parameters."""
    graph: Graph
    gm: object
    primals: list
    tangents: list
    inputs: dict
    positions: list
    n_params: int = 0

    def reference(self) -> dict:
        """{IR output name: ndarray} computed by torch running the fx joint graph itself."""
        import torch
        with torch.no_grad():
            flat = list(_flat(self.gm(list(self.primals), list(self.tangents))))
        return {name: flat[i].detach().numpy() for name, i in zip(self.graph.outputs, self.positions)}


def capture_joint(fn, *args, math_attention: bool = True):
    """(gm, primals, tangents): the fx joint graph of `fn(*args)` (tensors in `args` that
    require grad get gradients), `args` as a list, and all-ones tangents shaped like gm's
    tangent placeholders (the backward of summing every differentiable output). fn must
    return tensors; it runs once, eagerly compiled from the trace."""
    import torch
    from torch._functorch.aot_autograd import aot_function, make_boxed_func
    from torch._functorch.partitioners import default_partition

    captured = {}

    def partition_fn(joint, joint_inputs, **kw):
        captured["joint"] = joint
        return default_partition(joint, joint_inputs, **kw)

    def keep(gm, example_inputs):   # run the traced halves as they are: we only want the trace
        return make_boxed_func(gm)

    compiled = aot_function(fn, fw_compiler=keep, bw_compiler=keep, partition_fn=partition_fn)
    ctx = nullcontext()
    if math_attention:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = sdpa_kernel(SDPBackend.MATH)
    with ctx:
        out = compiled(*args)
    check("joint" in captured, "fx-import", "aot_autograd traced no backward: no input requires grad "
          "or the output does not depend on one; pass parameters with requires_grad=True")
    gm = captured["joint"]
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tangents = [torch.ones(tuple(n.meta["val"].shape), dtype=n.meta["val"].dtype)
                for n in holders if n.name.startswith("tangents")]
    del out
    return gm, list(args), tangents


def import_module(model, loss, *inputs, targets=(), math_attention: bool = True) -> JointImport:
    """Capture and import the joint graph of `loss(model(*inputs), *targets)` with respect to
    the model's parameters (buffers, `inputs` and `targets` are primals without gradient; a
    tensor the loss closes over instead would be a constant torch refuses to trace). The
    tangent of each output is ones, i.e. the backward of `loss`."""
    import torch
    from torch.func import functional_call

    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
    pnames, bnames = list(params), list(buffers)

    def fn(*flat):
        p = dict(zip(pnames, flat[:len(pnames)]))
        b = dict(zip(bnames, flat[len(pnames):len(pnames) + len(bnames)]))
        rest = flat[len(pnames) + len(bnames):]
        y = functional_call(model, {**p, **b}, tuple(rest[:len(rest) - len(targets)]))
        return loss(y, *rest[len(rest) - len(targets):])

    primals = [p.detach().clone().requires_grad_(True) for p in params.values()] + \
              [b.detach().clone() for b in buffers.values()] + [x.detach() for x in (*inputs, *targets)]
    gm, primals, tangents = capture_joint(fn, *primals, math_attention=math_attention)
    primals = [p.detach() for p in primals]
    g = from_fx(gm)
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    arrays = dict(zip(names, [t.numpy() for t in primals + tangents]))
    return JointImport(g, gm, primals, tangents, arrays, fx_output_positions(gm), len(pnames))


# ---- evaluating opaque nodes with torch ----------------------------------------------------
def torch_impls(g: Graph) -> dict:
    """`impls` for `evaluate`/`run`: every opaque op the importer made in `g` (the nodes with
    a `target` attribute) replays its recorded ATen call on torch CPU tensors."""
    return {n.op: _replay for n in g.nodes.values() if n.attr("target") is not None}


def _replay(spec, target, **arrays):
    import torch
    packet, overload = target.split(".")[-2:]
    fn = getattr(getattr(torch.ops.aten, packet), overload)
    tensors = [torch.from_numpy(np.ascontiguousarray(arrays[f"arg{i}"])) for i in range(len(arrays))]

    def dec(a):
        if isinstance(a, tuple) and len(a) == 2 and a[0] in (_TENSOR, _DTYPE, _DEVICE, _MISC):
            tag, v = a
            check(tag != _MISC, "fx-import", f"{target} has an argument {v} that cannot be replayed")
            return tensors[v] if tag == _TENSOR else (getattr(torch, v) if tag == _DTYPE else torch.device(v))
        return [dec(x) for x in a] if isinstance(a, tuple) else a

    args, kwargs = spec
    with torch.no_grad():
        out = fn(*dec(args), **{k: dec(v) for k, v in kwargs})
    if isinstance(out, (tuple, list)):
        return tuple(None if o is None else o.numpy() for o in out)
    return out.numpy()


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    else:
        yield x
