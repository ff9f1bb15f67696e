"""Runs the numba_cuda rows of the bad-input table under the CUDA simulator, as a script in a
subprocess (NUMBA_ENABLE_CUDASIM must be set before numba.cuda is first imported, which the
pytest process may already have done). Prints `ok NAME` or `FAIL NAME: why` per row."""
import os
import sys

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"


def main():
    from tests.core.bad_inputs.call_rows import rows
    from tests.core.bad_inputs.common import check
    for row in rows("numba_cuda", simulator=True):
        try:
            check(row)
            print(f"ok {row.name}", flush=True)
        except AssertionError as e:
            print(f"FAIL {row.name}: {' '.join(str(e).split())}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
