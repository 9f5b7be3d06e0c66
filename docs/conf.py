"""Sphinx configuration of ppgm's documentation: the API reference from the docstrings (numpydoc)
and the tutorials with their outputs (executed by ``docs/build.py`` before Sphinx runs)."""

import warnings

import ppgm

warnings.filterwarnings("ignore", category=FutureWarning)  # pgmpy's own deprecation notices

project = "ppgm"
author = "The ppgm developers"
copyright = "2026, The ppgm developers"
release = version = ppgm.__version__

extensions = ["sphinx.ext.autodoc", "numpydoc", "myst_nb"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
master_doc = "index"

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

nb_execution_mode = "off"  # docs/build.py executed the notebooks (quick size) into _tutorials/
nb_output_stderr = "remove"
myst_enable_extensions = ["dollarmath"]
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]

html_theme = "alabaster"
html_title = f"ppgm {release}"


def _skip_generated(app, what, name, obj, skip, options):
    """scikit-learn attaches metadata-routing methods (``set_fit_request``, ...) to estimators;
    their docstrings point into scikit-learn's own documentation."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_generated)
