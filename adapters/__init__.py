"""ppgm.adapters: the boundary between ppgm's engine and pgmpy, pandas and networkx.

Everything here takes and returns pgmpy objects (``DiscreteMarkovNetwork``,
``DiscreteBayesianNetwork``, ``DiscreteFactor``, ``TabularCPD``) and DataFrames.
"""

import warnings as _warnings

with _warnings.catch_warnings():
    # pgmpy imports tqdm.auto, which warns in a Jupyter kernel without ipywidgets, and announces a
    # deprecation inside its own estimators package when that is imported: loaded here once, quietly,
    # so that neither reaches ppgm's users (the modules stay cached for pgmpy's later imports)
    _warnings.filterwarnings("ignore", message="IProgress not found")
    _warnings.filterwarnings("ignore", category=FutureWarning, module=r"pgmpy(\.|$)")
    import pgmpy.estimators  # noqa: F401
    import tqdm.auto  # noqa: F401

from .data import contingency_tables, decode, encode, infer_domain, read_records, sample, sample_partitions, to_frame
from .inference import LogBeliefPropagation
from .predict import impute, predict, predict_probability
from .bif import bayesian_network, read_bif, write_bif
from .examples import adult_schema, dirichlet_chain_network, load_adult, load_bif_example, mobility_study
from .metrics import kl_divergence, marginals, total_variation
from .private import BoundedTables, CGMEstimator, NaiveMLEEstimator, NoisyFactor, NoisyTables, bounded_tables, release_tables
from .robust import RobustFilter
from .synthesis import SyntheticRelease, aim_release, mst_release
from .missing import MarkovNetworkEstimator, MissingValuesEM
from .mer import MERFit, ini, mer
from .aggregated import Aggregates, FeatureEncoder, MaxEntClassifier, aggregate
from .dask_backend import dask_executor, filter_dask
from ppgm.core.progress import set_progress
from ppgm.privacy.mechanisms import (BudgetExceeded, GaussianMechanism, LaplaceMechanism, NotPrivateWarning, PrivacyAccountant,
                                     StatesFromDataWarning)
from .models import (
    declared_states,
    bayes_from_pgmpy,
    bayes_to_pgmpy,
    markov_from_pgmpy,
    markov_network,
    markov_to_pgmpy,
    tabular_cpds,
    to_engine,
)

__all__ = [
    "LogBeliefPropagation",
    "predict_probability",
    "predict",
    "impute",
    "read_bif",
    "write_bif",
    "bayesian_network",
    "CGMEstimator",
    "GaussianMechanism",
    "LaplaceMechanism",
    "NaiveMLEEstimator",
    "NoisyFactor",
    "NoisyTables",
    "PrivacyAccountant",
    "NotPrivateWarning",
    "StatesFromDataWarning",
    "BudgetExceeded",
    "release_tables",
    "bounded_tables",
    "BoundedTables",
    "RobustFilter",
    "SyntheticRelease",
    "mst_release",
    "aim_release",
    "MissingValuesEM",
    "MarkovNetworkEstimator",
    "MERFit",
    "Aggregates",
    "FeatureEncoder",
    "MaxEntClassifier",
    "aggregate",
    "dask_executor",
    "filter_dask",
    "sample_partitions",
    "load_adult",
    "adult_schema",
    "ini",
    "mer",
    "bayes_from_pgmpy",
    "declared_states",
    "bayes_to_pgmpy",
    "contingency_tables",
    "decode",
    "dirichlet_chain_network",
    "load_bif_example",
    "mobility_study",
    "encode",
    "infer_domain",
    "kl_divergence",
    "marginals",
    "markov_from_pgmpy",
    "markov_to_pgmpy",
    "markov_network",
    "read_records",
    "to_frame",
    "sample",
    "tabular_cpds",
    "to_engine",
    "total_variation",
    "set_progress",
]
