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
    for module in ("ppgm/__init__.py", "ppgm/junction_tree.py", "ppgm/adapters/__init__.py", "ppgm/adapters/inference.py",
                   "ppgm/adapters/datasets/adult/adult_train.csv.gz", "ppgm/adapters/datasets/adult/adult_test.csv.gz",
                   "ppgm/adapters/datasets/adult/schema.json"):
        assert module in names
    assert not any(n.startswith("adapters/") for n in names)


def test_imported_adapters_is_the_subpackage():
    assert ppgm.adapters.__name__ == "ppgm.adapters"
    assert hasattr(ppgm.adapters, "LogBeliefPropagation")
