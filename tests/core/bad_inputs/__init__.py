"""The bad-input table (tests/core/test_bad_inputs.py runs it): one module per area, each
exporting ROWS, a list of `Row`s built with the helpers in common.py."""
