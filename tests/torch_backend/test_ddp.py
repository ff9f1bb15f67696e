"""DistributedDataParallel (2 processes, gloo, CPU): the evt backend gives eager's gradients."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

WORKER = Path(__file__).with_name("ddp_worker.py")
ROOT = Path(__file__).parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_gradients_match_eager(tmp_path):
    port, world = _free_port(), 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    outs = [tmp_path / f"rank{r}.json" for r in range(world)]
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(r), str(world), str(port), str(outs[r])],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=150)[0])
    finally:
        for p in procs:     # a hung rank must not outlive the test
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    results = [json.loads(o.read_text()) for o in outs]
    for r in results:
        assert r["fused"] > 0
        np.testing.assert_allclose(r["evt"]["losses"], r["eager"]["losses"], rtol=1e-5, atol=1e-6)
        for a, b in zip(r["evt"]["grads"], r["eager"]["grads"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # DDP averaged the gradients: both ranks hold the same ones
    for a, b in zip(results[0]["evt"]["grads"], results[1]["evt"]["grads"]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
