import pytest

torch = pytest.importorskip("torch")


def test_mlp_joint_graph_imports_and_partitions():
    from torch._functorch.aot_autograd import aot_function

    from evt_core import partition as P
    from evt_core.partition.fx_import import from_fx

    captured = {}

    def compiler(gm, example_inputs):
        captured["gm"] = gm
        return gm

    def partition_fn(joint, joint_inputs, **kw):
        captured["joint"] = joint
        from torch._functorch.partitioners import default_partition
        return default_partition(joint, joint_inputs, **kw)

    f = aot_function(lambda x, w: torch.nn.functional.gelu(x @ w).sum(), fw_compiler=compiler,
                     partition_fn=partition_fn)
    f(torch.randn(8, 4, requires_grad=True), torch.randn(4, 6, requires_grad=True)).backward()
    g = from_fx(captured["joint"])
    P.partition(g).check()
