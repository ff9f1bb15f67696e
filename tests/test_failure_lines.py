"""conftest.py's report hook: a failing test is named on stderr as it fails, so a GPU run that
its time limit cuts before pytest's summary still says which tests failed."""
import shutil
import subprocess
import sys
from pathlib import Path


def test_a_failure_is_named_on_stderr_before_the_summary(tmp_path):
    shutil.copy(Path(__file__).resolve().parents[1] / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_x.py").write_text("def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 0\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED test_x.py::test_bad (call)" in run.stderr, run.stderr
    assert "test_ok" not in run.stderr
