"""Test configuration shared by tests/ and properties/.

Hypothesis profiles: `dev` (fast, the default), `ci` (derandomised, more examples; chosen
automatically when the CI environment variable is set), `gpu` (hundreds of examples, no
deadline: the first compile of each kernel is slow). Override with HYPOTHESIS_PROFILE=name
or --hypothesis-profile. EVT_VERIFY=1 makes the pipeline run the IR verifier after every pass.
"""
import os
import sys

from hypothesis import HealthCheck, settings

os.environ.setdefault("EVT_VERIFY", "1")

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("ci", parent=settings.get_profile("ci"), max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("gpu", max_examples=300, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


def pytest_runtest_logreport(report):
    """A failing test's name goes to stderr the moment it fails (with xdist: as the controller
    receives it), so a run cut by its time limit, as the GPU runs are, still says which tests
    failed; under -q pytest itself prints only an F until its summary."""
    if report.failed:
        sys.stderr.write(f"\nFAILED {report.nodeid} ({report.when})\n")
        sys.stderr.flush()
