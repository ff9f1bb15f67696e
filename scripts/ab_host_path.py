"""A/B of the numba repeated call's capture query, interleaved in one process:
torch's current-stream query (streams.capture_query) against the ctypes driver query
(streams.capturing), plus each query alone. Ad-hoc measurement tool."""
import time

import numpy as np
import torch

import evt_core
from bench.launch_overhead import alone_us, per_call_us, tiny_problem
from evt_backends.gpu import streams

A, B, bias, tree = tiny_problem()
k = evt_core.compile(tree, backend="numba_cuda")
call = lambda: k(A, B, bias=bias)  # noqa: E731
for _ in range(50):
    call()
torch.cuda.synchronize()
runner = getattr(k.run, "__self__", k.run)
fast = next(iter(runner._fast.values()))
torch_q, driver_q = fast.capturing, streams.capturing
stream = fast.stream()
res = {"torch query": [], "driver query": []}
alone = {"torch query": [], "driver query": []}
for _ in range(7):
    for name, q in (("torch query", torch_q), ("driver query", driver_q)):
        fast.capturing = q
        res[name].append(per_call_us(call, 3000, torch)[0])
        alone[name].append(alone_us(call, 500, torch))
for name in res:
    print(f"{name:14s} back-to-back {np.median(res[name]):6.2f} us (min {min(res[name]):.2f})   alone {np.median(alone[name]):6.2f} us")
for name, q in (("torch query", torch_q), ("driver query", driver_q)):
    t = time.perf_counter()
    for _ in range(100000):
        q(stream)
    print(f"{name} alone: {(time.perf_counter() - t) * 10:.3f} us per query")
