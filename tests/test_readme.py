"""Every Python block of README.md runs as written, each in a fresh process (a new user copying it
into a new interpreter), in an empty working directory; and the README's quoted benchmark figures
are exactly what ``benchmarks/readme_figures.py`` copies from ``benchmarks/RESULTS.md``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs_as_written_in_a_fresh_process(code, tmp_path):
    env = dict(os.environ, PPGM_PROGRESS="0", PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"--- block ---\n{code}\n--- stderr ---\n{out.stderr[-3000:]}"


def test_readme_figures_are_copied_from_results():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import readme_figures
    finally:
        sys.path.pop(0)
    assert readme_figures.synced(README, (ROOT / "benchmarks" / "RESULTS.md").read_text()) == README
