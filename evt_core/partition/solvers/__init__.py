"""Solvers for one `Problem`: each returns a `Solution`. Search lives here; the rules live in
`problem.py` (as forbid/order constraints) and the objective in `cost.py`."""
