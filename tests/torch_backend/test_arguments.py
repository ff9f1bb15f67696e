"""A wrong argument to `evt_core.torch.backend(...)` or `kernel_op(...)` is refused when the
backend or op is made, naming the argument. Found only at the first CUDA call, a typo would run
the graph unfused with a warning; on CPU tensors (always the NumPy backend) never at all, so
these checks are the only place a CPU user learns of it."""
import pytest

torch = pytest.importorskip("torch")

import evt_core  # noqa: E402
import evt_core.torch as et  # noqa: E402
from evt_core.errors import ArgumentError, UnsupportedError  # noqa: E402


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"kernels": "nonexistent"}, ArgumentError, "kernels='nonexistent'.*'auto'.*'cupy'.*'numba_cuda'.*'numpy'"),
    ({"kernels": None}, ArgumentError, "kernels=None"),
    ({"solver": "fast"}, ArgumentError, "solver='fast'.*bnb.*greedy.*milp"),
    ({"time_limit": -1}, ArgumentError, "time_limit=-1"),
    ({"time_limit": "30"}, ArgumentError, "time_limit='30'"),
    ({"strict": "yes"}, ArgumentError, "strict='yes'.*True or False"),
    ({"cudagraphs": 1}, ArgumentError, "cudagraphs=1"),
    # kernel-backend options: the names of the backend(s) `kernels` may pick, bools as bools
    ({"kernels": "numpy", "deterministic": True}, UnsupportedError, "'numpy' has no option 'deterministic'"),
    ({"kernels": "numba_cuda", "tile": "128x128x64/s6"}, UnsupportedError, "'numba_cuda' has no option 'tile'"),
    ({"kernels": "cupy", "bogus": 1}, UnsupportedError, "'cupy' has no option 'bogus'"),
    ({"tile": "128x128x64/s6"}, ArgumentError, "'tile' is an option of cupy only.*may pick numba_cuda.*kernels='cupy'"),
    ({"sm90_schedule": "pingpong"}, ArgumentError, "'sm90_schedule' is an option of numba_cuda only"),
    ({"deterministic": 1}, ArgumentError, "deterministic=1.*True or False"),
])
def test_backend_refuses_by_name(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        et.backend(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {}, {"kernels": "numpy", "strict": True, "time_limit": 10}, {"deterministic": True, "fast_math": "auto"},
    {"kernels": "cupy", "split_k": 2, "tile": "128x128x64/s6"}, {"kernels": "numba_cuda", "sm90_schedule": "pingpong"},
    # both GPU backends split K, so "auto" takes the option
    {"split_k": 2}, {"split_k": "auto"}, {"kernels": "numba_cuda", "split_k": 4},
    {"solver": "greedy", "time_limit": None},
])
def test_valid_arguments_are_taken(kwargs):
    be = et.backend(**kwargs)
    assert be.kernels == kwargs.get("kernels", "auto")


def test_kernel_op_refuses_an_unknown_backend_and_option():
    tree = evt_core.trace(lambda accum: {"D": accum}, {"accum": torch.empty(4, 4).numpy(),
                                                       "D": torch.empty(4, 4).numpy()})
    with pytest.raises(ArgumentError, match="kernel_op\\(kernels='cuda'\\)"):
        et.kernel_op(tree, kernels="cuda")
    with pytest.raises(UnsupportedError, match="'cupy' has no option 'schedule'"):
        et.kernel_op(tree, kernels="cupy", schedule="pingpong")
    # and the check is not the call's: a valid op still runs on CPU tensors
    out = et.kernel_op(tree, kernels="cupy", deterministic=True)(torch.ones(4, 2), torch.ones(2, 4))
    assert torch.equal(out["D"], torch.full((4, 4), 2.0))
