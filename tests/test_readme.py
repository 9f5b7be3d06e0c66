"""Every Python block of README.md and of the user guide (docs/guide/*.md) runs as written, each in a fresh
process (a new user copying it into a new interpreter), in an empty working directory; and the benchmark
figures the README and the documentation quote are exactly what ``benchmarks/readme_figures.py`` copies
from ``benchmarks/RESULTS.md``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
GUIDE = sorted((ROOT / "docs" / "guide").glob("*.md"))
BLOCKS = [(f"README-{i}", code) for i, code in enumerate(re.findall(r"```python\n(.*?)```", README, flags=re.S))]
BLOCKS += [(f"{page.stem}-{i}", code) for page in GUIDE for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))]


def test_the_readme_and_every_guide_page_have_python_blocks():
    assert sum(name.startswith("README") for name, _ in BLOCKS) >= 6
    assert {page.stem for page in GUIDE} - {"index"} <= {name.rsplit("-", 1)[0] for name, _ in BLOCKS}


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[name for name, _ in BLOCKS])
def test_readme_block_runs_as_written_in_a_fresh_process(code, tmp_path):
    env = dict(os.environ, PPGM_PROGRESS="0", PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"--- block ---\n{code}\n--- stderr ---\n{out.stderr[-3000:]}"


def test_quoted_figures_are_copied_from_results():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import readme_figures
    finally:
        sys.path.pop(0)
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    stale = [str(p.relative_to(ROOT)) for p in readme_figures.documents() if readme_figures.synced(p.read_text(), results) != p.read_text()]
    assert not stale, f"run python benchmarks/readme_figures.py: {stale}"
