"""ppgm: learning pgmpy graphical models from noisy, corrupted, aggregated or inconsistent data.

The engine (this package) works on numpy arrays and small dataclasses; ``ppgm.adapters`` converts
pgmpy models and pandas DataFrames to and from it.
"""

import os as _os
import sys as _sys

# In a source checkout (no install, or `python -m ppgm` from the repository root, which shadows the
# installed package) the adapters live beside this folder: a finder for the one name
# `ppgm.adapters` lets `import ppgm.adapters` load them from there. An installed wheel has
# ppgm/adapters/ and never takes this branch. Nothing is imported here.
_here = _os.path.dirname(__file__)
_source_adapters = _os.path.abspath(_os.path.join(_here, _os.pardir, "adapters"))
if not _os.path.isdir(_os.path.join(_here, "adapters")) and _os.path.isfile(_os.path.join(_source_adapters, "__init__.py")):
    import importlib.abc as _abc
    import importlib.util as _util

    class _SourceAdaptersFinder(_abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "ppgm.adapters":
                return None
            return _util.spec_from_file_location(
                name, _os.path.join(_source_adapters, "__init__.py"), submodule_search_locations=[_source_adapters]
            )

    if not any(type(f).__name__ == "_SourceAdaptersFinder" for f in _sys.meta_path):
        _sys.meta_path.append(_SourceAdaptersFinder())

from .bayes import BayesianNetwork
from .binary_encoding import BinaryEncoding, binary_encoding
from .cpts import CPTLayout, empirical_cpts
from .domain import Domain
from .factor import Factor, align, logsumexp
from .inference import Marginals, infer
from .junction_tree import Calibration, JunctionTree, JunctionTreeTooLarge
from .loopy import LoopyResult, loopy_belief_propagation
from .markov import MarkovNetwork
from .robust_filter import FilterResult, filter_known_topology
from .cgm import cgm_em, naive_mle, population_size
from .measurement import Measurement
from .mechanisms import (
    BudgetExceeded,
    GaussianMechanism,
    LaplaceMechanism,
    NotPrivateWarning,
    PrivacyAccountant,
    rho_from_epsilon_delta,
    zcdp_epsilon,
)
from .contributions import keep_at_most, reweight_by_individual
from .private_quantiles import private_quantiles
from .mle import fit_marginals
from .mer import MERResult
from .mer_discrete import DiscreteMER
from .mer_gaussian import GaussianMER
from .sample_sets import Moments, SampleSet, pooled_counts, pooled_moments
from .projection import project_simplex
from .metrics import entropy, kl_divergence, log_likelihood, nllh, total_variation
from .sampling import sample, sample_bayes, sample_markov
from .tables import contingency_tables
from .executor import BlockLost, InProcess, LocalBlocks, RecordBlock, record_blocks
from .progress import ConvergenceWarning, set_progress

__version__ = "0.1.0"

__all__ = [
    "BayesianNetwork",
    "BinaryEncoding",
    "CPTLayout",
    "FilterResult",
    "binary_encoding",
    "empirical_cpts",
    "filter_known_topology",
    "Calibration",
    "Domain",
    "Factor",
    "JunctionTree",
    "JunctionTreeTooLarge",
    "LoopyResult",
    "MarkovNetwork",
    "Marginals",
    "Measurement",
    "MERResult",
    "DiscreteMER",
    "GaussianMER",
    "Moments",
    "SampleSet",
    "pooled_counts",
    "pooled_moments",
    "LaplaceMechanism",
    "GaussianMechanism",
    "PrivacyAccountant",
    "BudgetExceeded",
    "NotPrivateWarning",
    "rho_from_epsilon_delta",
    "zcdp_epsilon",
    "keep_at_most",
    "reweight_by_individual",
    "private_quantiles",
    "cgm_em",
    "fit_marginals",
    "naive_mle",
    "population_size",
    "project_simplex",
    "align",
    "contingency_tables",
    "entropy",
    "infer",
    "kl_divergence",
    "log_likelihood",
    "logsumexp",
    "loopy_belief_propagation",
    "nllh",
    "sample",
    "sample_bayes",
    "sample_markov",
    "total_variation",
    "BlockLost",
    "InProcess",
    "LocalBlocks",
    "RecordBlock",
    "record_blocks",
    "set_progress",
    "ConvergenceWarning",
]
