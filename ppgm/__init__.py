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

# Public names load on first use (PEP 562): ``import ppgm`` stays light, and cvxpy (MER only),
# scipy.optimize and scipy.sparse.linalg are imported by the modules that need them.
_LAZY = {
    'BayesianNetwork': 'models.bayes',
    'BinaryEncoding': 'learners.binary_encoding',
    'binary_encoding': 'learners.binary_encoding',
    'CPTLayout': 'models.cpts',
    'empirical_cpts': 'models.cpts',
    'Domain': 'factors.domain',
    'Factor': 'factors.factor',
    'align': 'factors.factor',
    'logsumexp': 'factors.factor',
    'Marginals': 'inference.marginals',
    'infer': 'inference.marginals',
    'Calibration': 'inference.junction_tree',
    'JunctionTree': 'inference.junction_tree',
    'JunctionTreeTooLarge': 'inference.junction_tree',
    'LoopyResult': 'inference.loopy',
    'loopy_belief_propagation': 'inference.loopy',
    'MarkovNetwork': 'models.markov',
    'FilterResult': 'learners.robust_filter',
    'filter_known_topology': 'learners.robust_filter',
    'mst_select': 'synthesis.selection',
    'report_noisy_max': 'synthesis.selection',
    'Selected': 'synthesis.selection',
    'cgm_em': 'learners.cgm',
    'naive_mle': 'learners.cgm',
    'population_size': 'learners.cgm',
    'em_bayesian': 'learners.missing',
    'em_markov': 'learners.missing',
    'expected_tables': 'learners.missing',
    'fit_markov_records': 'learners.missing',
    'fit_markov_tables': 'learners.missing',
    'Measurement': 'models.measurement',
    'BudgetExceeded': 'privacy.mechanisms',
    'GaussianMechanism': 'privacy.mechanisms',
    'LaplaceMechanism': 'privacy.mechanisms',
    'NotPrivateWarning': 'privacy.mechanisms',
    'StatesFromDataWarning': 'privacy.mechanisms',
    'PrivacyAccountant': 'privacy.mechanisms',
    'rho_from_epsilon_delta': 'privacy.mechanisms',
    'zcdp_epsilon': 'privacy.mechanisms',
    'keep_at_most': 'privacy.contributions',
    'reweight_by_individual': 'privacy.contributions',
    'private_quantiles': 'privacy.private_quantiles',
    'fit_marginals': 'learners.mle',
    'Tying': 'models.tying',
    'MERResult': 'mer.program',
    'DiscreteMER': 'mer.discrete',
    'GaussianMER': 'mer.gaussian',
    'Moments': 'mer.sample_sets',
    'SampleSet': 'mer.sample_sets',
    'pooled_counts': 'mer.sample_sets',
    'pooled_moments': 'mer.sample_sets',
    'project_simplex': 'learners.projection',
    'entropy': 'inference.metrics',
    'kl_divergence': 'inference.metrics',
    'log_likelihood': 'inference.metrics',
    'nllh': 'inference.metrics',
    'total_variation': 'inference.metrics',
    'sample': 'inference.sampling',
    'sample_bayes': 'inference.sampling',
    'sample_markov': 'inference.sampling',
    'contingency_tables': 'inference.tables',
    'BlockLost': 'core.executor',
    'InProcess': 'core.executor',
    'LocalBlocks': 'core.executor',
    'RecordBlock': 'core.executor',
    'record_blocks': 'core.executor',
    'ConvergenceWarning': 'core.progress',
    'set_progress': 'core.progress',
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ppgm' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "Tying",
    "BayesianNetwork",
    "BinaryEncoding",
    "CPTLayout",
    "FilterResult",
    "binary_encoding",
    "empirical_cpts",
    "filter_known_topology",
    "mst_select",
    "report_noisy_max",
    "Selected",
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
    "StatesFromDataWarning",
    "rho_from_epsilon_delta",
    "zcdp_epsilon",
    "keep_at_most",
    "reweight_by_individual",
    "private_quantiles",
    "cgm_em",
    "fit_marginals",
    "naive_mle",
    "population_size",
    "em_bayesian",
    "em_markov",
    "expected_tables",
    "fit_markov_records",
    "fit_markov_tables",
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
