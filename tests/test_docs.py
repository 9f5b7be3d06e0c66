"""The documentation builds without a warning (Sphinx -W, numpydoc on every public docstring) and
its tutorial pages show the notebooks' outputs, figures included."""

from pathlib import Path

import pytest
from conftest import docs_build

pytestmark = pytest.mark.xdist_group("tutorials")  # with the tutorial tests: one worker runs the notebooks once

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_without_warnings_and_show_the_tutorials_figures(tmp_path, executed_tutorial):
    build = docs_build()
    notebooks = [executed_tutorial(p) for p in sorted((ROOT / "tutorials").glob("*.ipynb"))]
    assert len(notebooks) == len(list((ROOT / "tutorials").glob("*.ipynb"))) >= 5
    # Sphinx reads the executed notebooks from docs/_tutorials: point it there for this build
    target = ROOT / "docs" / "_tutorials"
    target.mkdir(exist_ok=True)
    for nb in notebooks:
        (target / nb.name).write_bytes(nb.read_bytes())
    out = build.build(tmp_path / "html")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    api = (tmp_path / "html" / "api.html").read_text()
    for name in ("LogBeliefPropagation", "release_tables", "RobustFilter", "MaxEntClassifier", "cgm_em", "filter_known_topology"):
        assert name in api
    pages = sorted((tmp_path / "html" / "_tutorials").glob("*.html"))
    assert len(pages) == len(notebooks)
    assert all("<img" in p.read_text() for p in pages)  # every tutorial page shows at least one figure
