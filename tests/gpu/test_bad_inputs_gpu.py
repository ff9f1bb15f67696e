"""The call rows of the bad-input table (tests/core/bad_inputs/call_rows.py) on the GPU
backends for real: the CPU suite runs numba_cuda's under the CUDA simulator and cupy's not at
all. Every refusal must be the same typed error; every valid spelling (NumPy scalars, reversed
views, column-major, bf16, ...) must equal the reference exactly (the rows use small-integer
GEMMs, exact in fp32)."""
import os

import pytest

import evt_core
from tests.core.bad_inputs.call_rows import rows
from tests.core.bad_inputs.common import check

pytestmark = pytest.mark.gpu


def _needs(backend):
    ok = evt_core.backends().get(backend)
    if not ok or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip(f"{backend} needs a CUDA GPU: {getattr(ok, 'reason', 'not registered') or 'simulator selected'}")


@pytest.mark.parametrize("row", rows("numba_cuda") + rows("cupy"), ids=lambda r: r.name)
def test_call_row_on_gpu(row):
    _needs(row.backend)
    check(row)
