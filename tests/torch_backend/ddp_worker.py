"""One rank of the DDP tests: `python ddp_worker.py RANK WORLD PORT OUT.json [gloo|nccl]`.

Trains the MLP for two steps under DistributedDataParallel twice from the same initial weights,
once compiled with the evt backend (then wrapped in DDP) and once eager, on rank-specific data,
and writes the loss and gradients of both to OUT.json. gloo (the default) runs on CPU tensors
(the NumPy kernels); nccl runs rank r on GPU r in fp16 (the GPU kernels, "auto")."""
import copy
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def main(rank, world, port, out, pg="gloo"):
    gpu = pg == "nccl"
    device, dtype = (torch.device("cuda", rank), torch.float16) if gpu else (torch.device("cpu"), torch.float32)
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group(pg, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    import evt_core.torch as et
    et.register()
    torch.manual_seed(0)
    # on the GPU, shapes the sm_90 kernels take (16-byte rows, a few tiles)
    din, dh, dout, rows = (256, 512, 128, 384) if gpu else (16, 32, 8, 6)
    base = torch.nn.Sequential(torch.nn.Linear(din, dh), torch.nn.ReLU(), torch.nn.Linear(dh, dout))
    base = base.to(device, dtype)
    g = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(rows, din, generator=g), torch.randint(0, dout, (rows,), generator=g)
    x, y = x.to(device, dtype), y.to(device)
    result = {}
    for name in ("evt", "eager"):
        inner = copy.deepcopy(base)
        # compiled, then wrapped: DDP's gradient hooks see the evt backward's gradients
        model = DDP(torch.compile(inner, backend="evt") if name == "evt" else inner,
                    device_ids=[rank] if gpu else None)
        net = model
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            loss = F.cross_entropy(net(x).float(), y)
            loss.backward()
            losses.append(loss.item())
            grads = [p.grad.float().cpu().tolist() for p in model.parameters()]
            opt.step()
        result[name] = {"losses": losses, "grads": grads}
    result["fused"] = sum(len(r.fused) for r in et.reports())
    with open(out, "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()
    # Everything is written and the group is gone. On a loaded 2-core machine the interpreter's
    # C++ teardown of torch's communication threads sometimes aborts ("terminate called without
    # an active exception", seen once in a full CI run on 2026-12-01): skip that teardown. A
    # rank that fails before this point still exits non-zero or leaves no result file.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *sys.argv[5:6])
