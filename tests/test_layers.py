"""The engine's layers: each subpackage of ``ppgm`` imports only from itself and the layers below it (as its
own docstring says), never from the adapters; no import circle between modules; no folder grows past
about fifteen modules; and the public names stay where users import them (``ppgm``, ``ppgm.adapters``)."""

import ast
import importlib
import re
from pathlib import Path

import networkx as nx
import pytest

import ppgm

ENGINE = Path(ppgm.__file__).parent
# bottom to top; a layer may import from the layers of a lower rank (siblings of one rank not from each other)
RANK = {"core": 0, "factors": 1, "models": 2, "inference": 3, "privacy": 3, "learners": 4, "mer": 4, "synthesis": 5}


def _modules() -> dict:
    """``{dotted name: path}`` of every module of the layer subpackages."""
    return {f"ppgm.{p.parent.name}.{p.stem}" if p.stem != "__init__" else f"ppgm.{p.parent.name}": p
            for layer in RANK for p in sorted((ENGINE / layer).glob("*.py"))}


def _imports(name: str, path: Path) -> set:
    """The ppgm modules (or packages) that ``name`` imports anywhere in its text, lazy imports included."""
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("ppgm"):
                # "from ..core import checks" names a module through its package
                found |= {f"{target}.{a.name}" if _is_module(f"{target}.{a.name}") else target for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ppgm")}
    return found


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return (ENGINE.joinpath(*parts[1:]).with_suffix(".py")).is_file() or ENGINE.joinpath(*parts[1:]).is_dir()


def _layer(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else None


def test_every_engine_module_lives_in_a_layer():
    loose = sorted(p.name for p in ENGINE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules outside the layer subpackages: {loose}"
    folders = sorted(p.name for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert set(folders) - {"adapters"} == set(RANK)


def _allowed(layer: str) -> set:
    """The layers ``ppgm.<layer>``'s docstring says it may import."""
    doc = importlib.import_module(f"ppgm.{layer}").__doc__ or ""
    return set(re.findall(r"``ppgm\.(\w+)``", doc.split("May import")[-1])) if "May import" in doc else set()


@pytest.mark.parametrize("layer", sorted(RANK))
def test_each_layer_says_what_it_holds_and_may_import_only_layers_below(layer):
    doc = importlib.import_module(f"ppgm.{layer}").__doc__ or ""
    assert len(doc.split()) > 20, f"ppgm.{layer} opens without saying what it is for"
    below = {other for other, rank in RANK.items() if rank < RANK[layer]}
    if not below:
        assert "Imports nothing of ppgm" in doc and not _allowed(layer)
    else:
        assert "May import" in doc and _allowed(layer) <= below, f"ppgm.{layer} may import {sorted(_allowed(layer))}"


@pytest.mark.parametrize("layer", sorted(RANK))
def test_a_layer_imports_only_itself_and_what_its_docstring_allows(layer):
    allowed = _allowed(layer) | {layer}
    wrong = sorted(f"{name} -> {target}" for name, path in _modules().items() if _layer(name) == layer
                   for target in _imports(name, path) if _layer(target) not in allowed)
    assert not wrong, f"imports outside ppgm.{layer}'s layers ({sorted(allowed)}): " + ", ".join(wrong)


def test_no_import_circle_between_modules():
    graph = nx.DiGraph()
    for name, path in _modules().items():
        graph.add_node(name)
        for target in _imports(name, path):
            if target in _modules() and target.count(".") == 2 and target != name:
                graph.add_edge(name, target)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import circles: {cycles[:5]}"


def test_no_folder_holds_more_than_fifteen_modules():
    sizes = {layer: len([p for p in (ENGINE / layer).glob("*.py") if p.stem != "__init__"]) for layer in RANK}
    assert max(sizes.values()) <= 15, sizes


PUBLIC_ENGINE = {
    "BayesianNetwork", "BinaryEncoding", "BlockLost", "BudgetExceeded", "CPTLayout", "Calibration", "ConvergenceWarning",
    "DiscreteMER", "Domain", "Factor", "FilterResult", "GaussianMER", "GaussianMechanism", "InProcess", "JunctionTree",
    "JunctionTreeTooLarge", "LaplaceMechanism", "LocalBlocks", "LoopyResult", "MERResult", "Marginals", "MarkovNetwork",
    "Measurement", "Moments", "NotPrivateWarning", "PrivacyAccountant", "RecordBlock", "SampleSet", "Selected", "Tying",
    "align", "binary_encoding", "cgm_em", "contingency_tables", "em_bayesian", "em_markov", "empirical_cpts", "entropy",
    "expected_tables", "filter_known_topology", "fit_marginals", "fit_markov_records", "fit_markov_tables", "infer",
    "keep_at_most", "kl_divergence", "log_likelihood", "logsumexp", "loopy_belief_propagation", "mst_select", "naive_mle",
    "nllh", "pooled_counts", "pooled_moments", "population_size", "private_quantiles", "project_simplex", "record_blocks",
    "report_noisy_max", "reweight_by_individual", "rho_from_epsilon_delta", "sample", "sample_bayes", "sample_markov",
    "set_progress", "total_variation", "zcdp_epsilon",
}
PUBLIC_ADAPTERS = {
    "Aggregates", "BoundedTables", "BudgetExceeded", "CGMEstimator", "FeatureEncoder", "GaussianMechanism",
    "LaplaceMechanism", "LogBeliefPropagation", "MERFit", "MarkovNetworkEstimator", "MaxEntClassifier", "MissingValuesEM",
    "NaiveMLEEstimator", "NoisyFactor", "NoisyTables", "NotPrivateWarning", "PrivacyAccountant", "RobustFilter",
    "SyntheticRelease", "adult_schema", "aggregate", "aim_release", "bayes_from_pgmpy", "bayes_to_pgmpy", "bounded_tables",
    "contingency_tables", "dask_executor", "declared_states", "decode", "dirichlet_chain_network", "encode", "filter_dask",
    "infer_domain", "ini", "kl_divergence", "load_adult", "load_bif_example", "markov_from_pgmpy", "markov_network", "markov_to_pgmpy", "mer",
    "mobility_study", "mst_release", "read_records", "release_tables", "sample", "sample_partitions", "set_progress",
    "tabular_cpds", "to_engine", "to_frame", "total_variation",
}


def test_the_public_names_stay_where_users_import_them():
    import ppgm.adapters as pa

    assert PUBLIC_ENGINE <= set(ppgm.__all__), sorted(PUBLIC_ENGINE - set(ppgm.__all__))
    assert PUBLIC_ADAPTERS <= set(pa.__all__), sorted(PUBLIC_ADAPTERS - set(pa.__all__))
    for mod, names in ((ppgm, PUBLIC_ENGINE), (pa, PUBLIC_ADAPTERS)):
        for name in names:
            obj = getattr(mod, name)
            assert not isinstance(obj, type(ppgm)), f"{mod.__name__}.{name} is a module, not the public object"
