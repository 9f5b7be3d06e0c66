"""Select, measure, generate: a private release that chooses its own cliques (MST-style) and the
synthetic records of the model ppgm fits to it.

Everything the release publishes is charged before any noise is drawn: the one-way tables, the
selection rounds and the selected pair tables, three parts of one zCDP budget. The domain is public
(``state_names``), one individual's contribution is bounded by a public rule, the noise is integer
and sampled by OpenDP, the selection is report-noisy-max sampled by OpenDP. The fit and the
synthetic records are post-processing of the published tables.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from pgmpy.models import DiscreteMarkovNetwork

from ppgm.core import checks
from ppgm.learners.cgm import cgm_em, naive_mle, population_size
from ppgm.models.measurement import Measurement
from ppgm.privacy.mechanisms import GaussianMechanism, PrivacyAccountant, check_release_arguments, noise_generator
from ppgm.core.rng import as_generator
from ppgm.inference.sampling import round_markov, sample_markov
from ppgm.synthesis.aim import ALPHA, ROUNDS_PER_VARIABLE, aim_select, closure
from ppgm.synthesis.selection import Selected, mst_select

from .columns import Schema
from .models import markov_to_pgmpy
from .private import NoisyFactor, NoisyTables, _write_report, bounded_tables, read_release

ESTIMATORS = ("cgm", "naive")

#: Share of a release's budget that measures its numeric columns' fine histograms (their bins and
#: within-bin shapes), when it has numeric columns.
NUMERIC_SHARE = 0.1


@dataclass
class SyntheticRelease:
    """What :func:`mst_release` and :func:`aim_release` return: the published tables and choices, the
    fitted model and the synthetic records.

    Parameters
    ----------
    synthetic : pandas.DataFrame
        Records from the fitted model (rounded expected counts, or exact draws), states as declared.
    model : pgmpy.models.DiscreteMarkovNetwork
        The fitted network (one factor per measured clique).
    tables : NoisyTables
        Every published table (one-way tables, then the selected marginals) with its noise law.
    selected : list of ppgm.synthesis.selection.Selected
        The chosen marginals, in order, with how each was chosen (public).
    accountant : PrivacyAccountant
        Its ledger names every published part and its cost.
    fit : object
        The engine's fit (``CGMResult`` or ``FitResult``; for AIM's ``estimator="rounds"`` the last
        round's ``FitResult``): history, regularisation chosen.
    private : bool
        False when ``seed`` made the noise and the selection reproducible (not private).
    spent : list of dict
        The release's parts and their zCDP cost.
    history : list of dict
        AIM's rounds (``ppgm.synthesis.aim.AIMRun.history``: clique, sigma, epsilon, cost, model size); empty
        for MST. It has one entry more than ``selected``: ``history[0]`` is the first round, which measures
        every one-way table (its ``clique`` is None, it chooses nothing), and ``history[i]`` is the round
        that chose ``selected[i - 1]``.
    seconds : dict
        Wall time of each stage: ``select`` (counting, noise and selection), ``fit``, ``synthesize``.
    schema : ppgm.adapters.columns.Schema
        The released columns: states, and the numeric columns' bins and within-bin shapes (public:
        read from the release's noisy fine histograms).

    Examples
    --------
    >>> import warnings
    >>> df = pd.DataFrame({"A": [0, 1] * 200, "B": [0, 1] * 200})
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     rel = mst_release(df, {"A": [0, 1], "B": [0, 1]}, rho=1.0, seed=0, estimator="naive", progress=False)
    >>> rel.selected[0].clique, rel.private
    (('A', 'B'), False)
    """

    synthetic: pd.DataFrame
    model: DiscreteMarkovNetwork
    tables: NoisyTables
    selected: list
    accountant: PrivacyAccountant
    fit: object
    private: bool
    spent: list = field(default_factory=list)
    history: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    schema: Schema | None = None

    def __repr__(self) -> str:
        method = f"AIM, {len(self.history) - 1} rounds" if self.history else "MST"
        fit = type(self.fit).__name__
        rho = sum(p.get("rho", 0.0) for p in self.spent)
        return (f"SyntheticRelease({method}: {len(self.selected)} marginals chosen, {len(self.tables)} tables released at "
                f"rho {rho:.4g}; model of {len(self.model.nodes())} variables and {len(self.model.get_factors())} factors "
                f"({fit}); {len(self.synthetic):,} synthetic records; private={self.private})")

    def save(self, folder, delta: float = 1e-9) -> Path:
        """Write what ``ppgm synthesize`` writes into ``folder`` (made if absent): ``synthetic.csv``
        (the records, no index), ``release.npz`` (the noisy tables and their noise law,
        :meth:`NoisyTables.save`) and ``privacy_report.json`` (:meth:`report`).

        Parameters
        ----------
        folder : str or os.PathLike
        delta : float
            The delta at which the report states epsilon.

        Returns
        -------
        pathlib.Path
            The folder.

        Examples
        --------
        >>> import tempfile, warnings, os
        >>> df = pd.DataFrame({"A": [0, 1] * 200, "B": [0, 1] * 200})
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     rel = mst_release(df, {"A": [0, 1], "B": [0, 1]}, rho=0.5, seed=0, estimator="naive", progress=False)
        >>> sorted(os.listdir(rel.save(tempfile.mkdtemp())))
        ['privacy_report.json', 'release.npz', 'synthetic.csv']
        """
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        self.synthetic.to_csv(out / "synthetic.csv", index=False)
        self.tables.save(out / "release.npz")
        _write_report(out / "privacy_report.json", self.report(delta))
        return out

    def report(self, delta: float = 1e-9) -> dict:
        """The privacy report a curator publishes with the data: every part, its cost, the total
        in zCDP and as (epsilon, delta), and the chosen pairs with the reason for each.

        Parameters
        ----------
        delta : float
            The delta at which to state epsilon (tight conversion from zCDP).

        Returns
        -------
        dict
            ``parts``, ``rho``, ``epsilon``, ``delta``, ``private``, ``selected``.

        Examples
        --------
        >>> import warnings
        >>> df = pd.DataFrame({"A": [0, 1] * 200, "B": [0, 1] * 200})
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     rel = mst_release(df, {"A": [0, 1], "B": [0, 1]}, rho=0.5, seed=0, estimator="naive", progress=False)
        >>> r = rel.report(delta=1e-9)
        >>> round(r["rho"], 6), round(r["epsilon"], 2), len(r["parts"])
        (0.5, 6.47, 3)
        """
        out = {"parts": list(self.spent), "rho": float(sum(p.get("rho", 0.0) for p in self.spent)),
               "epsilon": self.accountant.epsilon_delta(delta) if self.accountant.spent > 0 else 0.0, "delta": delta,
               "private": self.private, "selected": [{"clique": list(s.clique), "reason": s.reason} for s in self.selected]}
        if self.schema is not None and self.schema.numeric:
            out["numeric"] = {c: d for c, d in self.schema.describe().items() if d["kind"] == "numeric"}
        return out


def _budget(rho, accountant) -> tuple[float, PrivacyAccountant]:
    if accountant is None:
        if rho is None:
            raise ValueError("rho: give the release's zCDP budget, or an accountant to spend what it has left")
        return checks.positive(rho, "rho"), PrivacyAccountant(rho=rho)  # the accountant bounds the budget
    if accountant.kind != "rho":
        raise ValueError("accountant: the release adds Gaussian noise and needs a zCDP (rho, or epsilon and delta) budget")
    return (accountant.remaining if rho is None else checks.positive(rho, "rho")), accountant


def _split(split) -> tuple[float, float, float]:
    try:
        parts = tuple(float(s) for s in split)
    except (TypeError, ValueError):
        raise TypeError(f"split: expected three shares (one-way, selection, pairs), got {split!r}") from None
    if len(parts) != 3 or min(parts) <= 0 or not np.all(np.isfinite(parts)):
        raise ValueError(f"split: expected three positive shares (one-way, selection, pairs), got {split!r}")
    total = sum(parts)
    return parts[0] / total, parts[1] / total, parts[2] / total


def _arguments(data, state_names, accountant, estimator, synthetic, fit_seed, progress, n_synthetic,
               estimators=ESTIMATORS) -> tuple:
    """The checks both releases make at their door, before anything is counted or charged."""
    check_release_arguments(GaussianMechanism(rho=1.0), accountant)
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data: expected a pandas DataFrame, got {type(data).__name__}")
    names = Schema.parse(state_names)
    columns = list(names.names)
    if len(columns) < 2:
        raise ValueError(f"state_names: expected the public states of two or more columns, got {columns}")
    absent = [c for c in columns if c not in data.columns]
    if absent:
        raise ValueError(f"state_names: columns {absent} are not in the data; it has {list(data.columns)}")
    estimator = checks.choice(estimator, "estimator", estimators)
    synthetic = checks.choice(synthetic, "synthetic", ("round", "sample"))
    fit_rng = as_generator(fit_seed, "fit_seed")
    progress = checks.flag(progress, "progress")
    if n_synthetic is not None:
        n_synthetic = checks.count(n_synthetic, "n_synthetic")
    return columns, names, estimator, synthetic, fit_rng, progress, n_synthetic


def _generate(counted, ms, published, parts, chosen, accountant, rng, estimator, synthetic, n_synthetic, fit_rng,
              progress, started, history=(), rounds_fit=None) -> SyntheticRelease:
    """Fit the released tables, draw the synthetic records (numbers inside their bins), and package the release."""
    dom = counted.domain
    seconds = {"select": time.perf_counter() - started}
    t0 = time.perf_counter()
    N = population_size(ms)
    warm = rounds_fit.model if rounds_fit is not None else None  # AIM's last round: the naive fit's pilot, nearly
    if estimator == "rounds":
        fit = rounds_fit
    elif estimator == "cgm":
        fit = cgm_em(dom, ms, N=N, progress=progress, seed=fit_rng, warm_start=warm)
    else:
        # a synthetic release is judged by its marginals: the weight that recovers them best in total variation
        # (the KL rule's weight, several times larger, lost 0.001-0.0014 of 2-way TV on AIM's releases)
        fit = naive_mle(dom, ms, N=N, seed=fit_rng, criterion="tv", warm_start=warm)
    seconds["fit"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_draw = n_synthetic if n_synthetic is not None else max(int(round(N)), 1)
    draw = round_markov if synthetic == "round" else sample_markov
    records = counted.schema.decode(draw(fit.model, n_draw, seed=fit_rng), fit_rng)
    seconds["synthesize"] = time.perf_counter() - t0
    factors = tuple(NoisyFactor(m.variables, m.values, {v: list(dom.state_names[v]) for v in m.variables}, m.noise, m.scale,
                                m.integer) for m in published)
    tables = NoisyTables(factors, None, tuple(parts), rng is None)
    return SyntheticRelease(records, markov_to_pgmpy(fit.model), tables, chosen, accountant, fit, rng is None, parts,
                            list(history), seconds, counted.schema)


def mst_release(
    data: pd.DataFrame,
    state_names: Mapping,
    *,
    rho: float | None = None,
    accountant: PrivacyAccountant | None = None,
    split: Sequence[float] = (1.0, 1.0, 1.0),
    estimator: str = "cgm",
    n_synthetic: int | None = None,
    synthetic: str = "round",
    individuals=None,
    max_contributions: int | None = None,
    reweight: bool = False,
    on_unknown: str = "raise",
    numeric_share: float = NUMERIC_SHARE,
    seed=None,
    fit_seed=0,
    progress: bool = True,
) -> SyntheticRelease:
    """Release a private model of ``data`` and synthetic records from it, choosing the cliques
    privately as MST does: all one-way tables, then the d - 1 pairs of a spanning tree chosen one
    by one by report-noisy-max on how badly the one-way model explains them, then those pairs.

    Parameters
    ----------
    data : pandas.DataFrame
        The records; the columns of ``state_names`` are released.
    state_names : mapping
        ``{column: states}``: the public domain, never read from the data.
    rho : float, optional
        zCDP budget of the release (``epsilon``-``delta`` users: :func:`ppgm.rho_from_epsilon_delta`).
        Default: what ``accountant`` has left.
    accountant : PrivacyAccountant, optional
        Charged for all three parts before any noise is drawn (an over-budget release raises
        ``BudgetExceeded`` and releases nothing).
    split : three floats
        Shares of ``rho`` for the one-way tables, the selection and the pairs (MST's thirds by default).
    estimator : {"cgm", "naive"}
        The fit: CGM-EM (default) or the naive MLE, each with its regularisation chosen from the release
        (the naive MLE's weight by the total variation of the released marginals, ``criterion="tv"``:
        a synthetic release is judged by its marginals; that weight is small, and the naive model's KL
        from the data's distribution several times CGM-EM's, ``docs/explain/cgm-em.md``, "The naive weight: a
        parametric bootstrap").
    n_synthetic : int, optional
        Synthetic records to draw; default the estimated record count.
    synthetic : {"round", "sample"}
        ``"round"`` (default, private-pgm's "round"): records whose measured cliques' counts are the
        model's expected counts rounded (:func:`ppgm.inference.sampling.round_markov`); ``"sample"``: i.i.d.
        exact draws (:func:`ppgm.inference.sampling.sample_markov`), with their sampling noise.
    individuals, max_contributions, reweight, on_unknown
        As :func:`ppgm.adapters.release_tables`: who each record belongs to and the public bound of
        their contribution.
    seed : int or numpy.random.Generator, optional
        Reproducible noise and selection for tests and tutorials: **not private** (a
        ``NotPrivateWarning``). Omit it for a private release.
    fit_seed : int or numpy.random.Generator
        Randomness of the fit's regularisation rule and of the synthetic records (post-processing).
    progress : bool
        Show CGM-EM's progress bar.

    Returns
    -------
    SyntheticRelease

    Examples
    --------
    >>> import warnings
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 2, 2000); b = (a + (rng.random(2000) < 0.1)) % 2; c = rng.integers(0, 3, 2000)
    >>> df = pd.DataFrame({"A": a, "B": b, "C": c})
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     rel = mst_release(df, {"A": [0, 1], "B": [0, 1], "C": [0, 1, 2]}, rho=1.0, seed=1, progress=False)
    >>> rel.selected[0].clique, len(rel.synthetic) > 1900, round(rel.report()["rho"], 6)
    (('A', 'B'), True, 1.0)
    """
    started = time.perf_counter()
    columns, names, estimator, synthetic, fit_rng, progress, n_synthetic = _arguments(
        data, state_names, accountant, estimator, synthetic, fit_seed, progress, n_synthetic)
    shares = _split(split)
    total, accountant = _budget(rho, accountant)
    rng = noise_generator(seed)  # None: private noise and selection
    ones = [(v,) for v in columns]
    pairs = list(combinations(columns, 2))
    def mst_parts(rest):
        return [{"what": f"one-way tables ({len(ones)})", "rho": rest * shares[0]},
                {"what": f"selection ({len(columns) - 1} rounds of report-noisy-max)", "rho": rest * shares[1]},
                {"what": f"selected pair tables ({len(columns) - 1})", "rho": rest * shares[2]}]

    counted, parts, rest = _counted(data, names, ones + pairs, total, numeric_share, accountant, mst_parts, rng,
                                    individuals=individuals, max_contributions=max_contributions, reweight=reweight,
                                    on_unknown=on_unknown)
    rho1, rho2, rho3 = (rest * s for s in shares)
    w = counted.contribution
    one_way = GaussianMechanism(rho=rho1).measure(counted.tables[:len(ones)], rng, contribution=w)
    chosen = mst_select(counted.domain, counted.tables[len(ones):], one_way, rho2, sensitivity=w, rng=rng)
    index = {tuple(t.variables): t for t in counted.tables[len(ones):]}
    pair_ms = GaussianMechanism(rho=rho3).measure([index[s.clique] for s in chosen], rng, contribution=w)
    ms: list[Measurement] = list(one_way) + list(pair_ms)
    return _generate(counted, ms, ms, parts, chosen, accountant, rng, estimator, synthetic, n_synthetic, fit_rng,
                     progress, started)


def _counted(data, schema, cliques, total, numeric_share, accountant, parts_of, rng, **bounds):
    """The release's records read once through its schema, every part charged just before the first
    noise is drawn, and the bounded tables counted: when there are numeric columns, ``numeric_share``
    of the budget releases their fine histograms (bins and within-bin shapes), the rest goes to
    ``parts_of(rest)``. Returns the tables, the parts and the rest of the budget."""
    records = read_release(data, [(c,) for c in schema.names], schema)
    share = checks.in_range(numeric_share, "numeric_share", 0.0, 1.0, closed=False) if schema.numeric else 0.0
    rho_bins = total * share
    parts = ([{"what": f"numeric columns' fine histograms ({len(schema.numeric)})", "rho": rho_bins}] if rho_bins else [])
    parts += parts_of(total - rho_bins)
    counted = bounded_tables(records, cliques, seed=rng, bins_mechanism=GaussianMechanism(rho=rho_bins) if rho_bins else None,
                             noise_seed=rng, before_noise=lambda: accountant.charge(parts), **bounds)
    return counted, parts, total - rho_bins


def _workload(workload, columns) -> list[tuple]:
    if isinstance(workload, (int, np.integer)) and not isinstance(workload, bool):
        k = int(workload)
        if not 1 <= k <= len(columns):
            raise ValueError(f"workload: expected a degree between 1 and {len(columns)} (the columns), got {k}")
        return list(combinations(columns, k))
    try:
        sets = [tuple(s) for s in workload]
    except TypeError:
        raise TypeError(f"workload: expected a degree (int) or a list of column tuples, got {workload!r}") from None
    if not sets:
        raise ValueError("workload: expected at least one marginal")
    for s in sets:
        bad = [v for v in s if v not in columns]
        if not s or bad or len(set(s)) != len(s):
            raise ValueError(f"workload: {s!r} is not a set of distinct released columns ({columns})")
    order = {c: i for i, c in enumerate(columns)}
    return [tuple(sorted(s, key=order.__getitem__)) for s in sets]


def aim_release(
    data: pd.DataFrame,
    state_names: Mapping,
    *,
    rho: float | None = None,
    accountant: PrivacyAccountant | None = None,
    workload=3,
    weights: Sequence[float] | None = None,
    max_cells: int = 10_000_000,
    estimator: str = "cgm",
    n_synthetic: int | None = None,
    synthetic: str = "round",
    individuals=None,
    max_contributions: int | None = None,
    reweight: bool = False,
    on_unknown: str = "raise",
    numeric_share: float = NUMERIC_SHARE,
    seed=None,
    fit_seed=0,
    progress: bool = True,
) -> SyntheticRelease:
    """Release a private model of ``data`` and synthetic records from it, choosing the marginals
    adaptively as AIM does (:func:`ppgm.synthesis.aim.aim_select`): all one-way tables, then rounds that
    measure the workload marginal the current model answers worst, under a model-size cap.

    Parameters
    ----------
    data : pandas.DataFrame
        The records; the columns of ``state_names`` are released.
    state_names : mapping
        ``{column: states}``: the public domain, never read from the data.
    rho : float, optional
        zCDP budget of the whole release; default what ``accountant`` has left. The loop spends it
        exactly (its last round takes what is left).
    accountant : PrivacyAccountant, optional
        Charged for the one-way tables and the rounds before any noise is drawn.
    workload : int or list of tuple
        The marginals to answer well: a degree (3: every triple of columns, AIM's and OpenDP's
        default) or a list of column tuples. Candidates are their subsets (AIM's downward closure).
    weights : sequence of float, optional
        One per workload marginal (default 1).
    max_cells : int
        Junction-tree cells the fitted model may hold once the budget is spent (10 million is
        private-pgm's 80 MB); the cap grows with the budget spent.
    estimator : {"cgm", "naive", "rounds"}
        The final fit of the released tables: CGM-EM or the naive MLE with the release-chosen
        regularisation (the naive weight by total variation, as in :func:`mst_release`; each refits a
        model as large as the rounds grew it, several times over for the rule), or ``"rounds"``: the last round's naive fit (l2 = 1 / N, what AIM itself returns),
        at no extra cost.
    n_synthetic, synthetic, individuals, max_contributions, reweight, on_unknown, seed, fit_seed, progress
        As :func:`mst_release`.

    Returns
    -------
    SyntheticRelease
        ``history`` holds the rounds.

    Examples
    --------
    >>> import warnings
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 2, 2000); b = (a + (rng.random(2000) < 0.1)) % 2; c = rng.integers(0, 3, 2000)
    >>> df = pd.DataFrame({"A": a, "B": b, "C": c})
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     rel = aim_release(df, {"A": [0, 1], "B": [0, 1], "C": [0, 1, 2]}, rho=1.0, workload=2, seed=1, progress=False)
    >>> rel.selected[0].clique, round(rel.report()["rho"], 6)
    (('A', 'B'), 1.0)
    """
    started = time.perf_counter()
    columns, names, estimator, synthetic, fit_rng, progress, n_synthetic = _arguments(
        data, state_names, accountant, estimator, synthetic, fit_seed, progress, n_synthetic, ESTIMATORS + ("rounds",))
    sets = _workload(workload, columns)
    if weights is not None:
        weights = [checks.positive(x, "weights") for x in weights]
        if len(weights) != len(sets):
            raise ValueError(f"weights: expected one per workload marginal ({len(sets)}), got {len(weights)}")
    max_cells = checks.count(max_cells, "max_cells", maximum=10**12)
    total, accountant = _budget(rho, accountant)
    rng = noise_generator(seed)  # None: private noise and selection
    candidates = list(closure(sets, weights))
    def aim_parts(rest):
        one_way = rest * ALPHA / ROUNDS_PER_VARIABLE  # d tables at the first rounds' sigma: alpha rho d / T
        return [{"what": f"one-way tables ({len(columns)})", "rho": one_way},
                {"what": f"adaptive rounds (report-noisy-max over {len(candidates)} candidates, then the chosen marginal)",
                 "rho": rest - one_way}]

    counted, parts, rest = _counted(data, names, candidates, total, numeric_share, accountant, aim_parts, rng,
                                    individuals=individuals, max_contributions=max_contributions, reweight=reweight,
                                    on_unknown=on_unknown)
    index = {tuple(t.variables): t for t in counted.tables}
    run = aim_select(counted.domain, index.__getitem__, sets, rest, weights=weights, max_cells=max_cells,
                     sensitivity=counted.contribution, rng=rng, progress=progress)
    return _generate(counted, run.measurements, run.released, parts, run.selected, accountant, rng, estimator,
                     synthetic, n_synthetic, fit_rng, progress, started, run.history, run.fit)


__all__ = ["SyntheticRelease", "mst_release", "aim_release", "Selected"]
