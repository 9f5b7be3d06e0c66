"""`pip install .` (a real wheel, not an editable install) must ship ppgm.adapters."""

import subprocess
import sys
import zipfile
from pathlib import Path

import ppgm.adapters

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contains_the_adapters_subpackage(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("ppgm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("ppgm/__init__.py", "ppgm/inference/junction_tree.py", "ppgm/adapters/__init__.py", "ppgm/adapters/inference.py",
                   "ppgm/adapters/datasets/adult/adult_train.csv.gz", "ppgm/adapters/datasets/adult/adult_test.csv.gz",
                   "ppgm/adapters/datasets/adult/schema.json", "ppgm/py.typed", "ppgm/adapters/py.typed"):
        assert module in names
    assert not any(n.startswith("adapters/") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert f"Version: {ppgm.__version__}" in meta and "License-Expression: MIT" in meta
    assert any(n.endswith("licenses/LICENSE") for n in names)


def test_imported_adapters_is_the_subpackage():
    assert ppgm.adapters.__name__ == "ppgm.adapters"
    assert hasattr(ppgm.adapters, "LogBeliefPropagation")


def test_version_has_one_source_and_the_command_prints_it():
    out = subprocess.run([sys.executable, "-m", "ppgm", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"ppgm {ppgm.__version__}"
    assert "version =" not in (ROOT / "pyproject.toml").read_text().split("[tool.setuptools.dynamic]")[0]


def test_import_is_light_and_cvxpy_loads_only_for_mer():
    code = ("import sys, time; t = time.perf_counter(); import ppgm; dt = time.perf_counter() - t; "
            "heavy = [m for m in ('cvxpy', 'scipy.optimize', 'scipy.sparse.linalg', 'pgmpy') if m in sys.modules]; "
            "ppgm.GaussianMER; print(dt, heavy, 'cvxpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT / "tests")
    dt, heavy, cvxpy_after = out.stdout.rsplit(" ", 1)[0].split(" ", 1)[0], out.stdout.split("[", 1)[1].split("]")[0], out.stdout.split()[-1]
    assert heavy == "" and cvxpy_after == "True"
