"""The engine type-checks: mypy at the strictness stated in pyproject.toml ([tool.mypy]) finds no error."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_the_engine():
    if shutil.which("mypy") is None and subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode:
        pytest.fail("mypy is missing: it is part of the test extras (pip install '.[test]')")
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(ROOT / "ppgm")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "Success" in out.stdout
