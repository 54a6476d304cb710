"""The capture tests again, against flashinfer-python 0.6.16 (the oldest version profkit supports).

0.6.16 lacks rank_tactics, profile_tactic and _winner_cache and times cold L2 differently; the
pure-Python wheel is installed with --no-deps into a folder that is put first on PYTHONPATH.
"""

import os
import subprocess
import sys

from conftest import ROOT

VERSION = "0.6.16"


def test_capture_suite_passes_on_0616():
    target = ROOT / ".venv-extra" / f"flashinfer-{VERSION}"
    if not (target / "flashinfer" / "__init__.py").is_file():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        f"flashinfer-python=={VERSION}"], check=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    # One process imports flashinfer (seconds, with torch): it checks the version it got, then runs the tests.
    args = ["-q", "-n", "0", "-p", "no:warnings", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_capture.py")]
    code = (f"import sys, flashinfer, pytest\nprint('flashinfer', flashinfer.__version__)\n"
            f"sys.exit(pytest.main({args!r}))")  # -n 0: one process, inside this test's worker
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.startswith(f"flashinfer {VERSION}\n"), (result.stdout[:300], result.stderr[-3000:])
    assert result.returncode == 0, result.stdout[-3000:]
