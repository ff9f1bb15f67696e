"""The autotuner's ranking, on the CPU with fake kernels and a fake clock: candidates are timed in
interleaved rounds through their prepared launch (not bind + tensor-map encoding), and ranked by
median, so a clock that drifts during tuning does not decide the winner; a candidate that fails
to build or launch is skipped."""
import itertools

from evt_backends.cupy import autotune


class _Cfg:
    def __init__(self, label):
        self._label = label

    def label(self):
        return self._label


class _Kernel:
    def __init__(self, cfg, log):
        self.cfg, self.log = cfg, log

    def prepare(self, bound):
        self.log.append(("prepare", self.cfg.label()))
        return _Prepared(self)


class _Prepared:
    def __init__(self, k):
        self.k = k

    def fire(self, outs):
        if self.k.cfg.label() == "broken":
            raise RuntimeError("launch failed")
        self.k.log.append(("fire", self.k.cfg.label()))


class _Bound:
    outputs, reductions = [], []


def test_candidates_prepared_once_timed_in_rotated_rounds_ranked_by_median(monkeypatch):
    true_ms = {"a": 1.00, "b": 0.90, "c": 0.95}
    clock = itertools.count()
    order = []

    def fake_time(launch):
        launch()
        label = log[-1][1]
        order.append(label)
        return true_ms[label] * (1 + 0.3 * (next(clock) // 3))   # the clock slows 30 % each round
    log = []
    monkeypatch.setattr(autotune, "time_launch", fake_time)
    cfgs = [_Cfg("b"), _Cfg("a"), _Cfg("broken"), _Cfg("c")]
    best, results = autotune.tune(cfgs, lambda c: _Kernel(c, log), _Bound())
    assert best.cfg.label() == "b"
    assert results["broken"].startswith("failed")
    assert sum(1 for e in log if e[0] == "prepare") == 4              # prepared once each
    assert order[:3] == ["b", "a", "c"] and order[3:6] == ["a", "c", "b"]   # rotated rounds
    assert len(order) == 3 * autotune.ROUNDS
