"""Build the documentation: execute the tutorials in their quick size into ``docs/_tutorials/``
(so the pages show their outputs and figures), then run Sphinx with warnings as errors.

    python docs/build.py [OUTDIR]      # default docs/_build/html
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def execute_tutorial(path: Path, dest: Path, timeout: int = 900) -> Path:
    """One tutorial, its first cell set to ``SIZE = "test"``, executed and written to ``dest``."""
    import nbformat
    from nbclient import NotebookClient

    dest.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    first.source = 'SIZE = "test"  # the documentation runs the quick size'
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "tutorials")}}).execute()
    target = dest / path.name
    nbformat.write(nb, target)
    return target


def execute_tutorials(dest: Path = HERE / "_tutorials", timeout: int = 900) -> list[Path]:
    """Every tutorial, executed in its quick size into ``dest`` (:func:`execute_tutorial`)."""
    return [execute_tutorial(path, dest, timeout) for path in sorted((ROOT / "tutorials").glob("*.ipynb"))]


def build(outdir: Path) -> subprocess.CompletedProcess:
    """Sphinx, warnings as errors (``-W --keep-going``: every warning is listed)."""
    env = dict(os.environ, PPGM_PROGRESS="0", PYTHONWARNINGS="ignore::FutureWarning")
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(HERE), str(outdir)],
                          capture_output=True, text=True, env=env)


if __name__ == "__main__":
    execute_tutorials()
    result = build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "_build" / "html")
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.returncode)
