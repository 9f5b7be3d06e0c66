"""Select, measure, generate: a private release that chooses its own cliques (MST-style) and the
synthetic records of the model ppgm fits to it.

Everything the release publishes is charged before any noise is drawn: the one-way tables, the
selection rounds and the selected pair tables, three parts of one zCDP budget. The domain is public
(``state_names``), one individual's contribution is bounded by a public rule, the noise is integer
and sampled by OpenDP, the selection is report-noisy-max sampled by OpenDP. The fit and the
synthetic records are post-processing of the published tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from pgmpy.models import DiscreteMarkovNetwork

from ppgm import checks
from ppgm.cgm import cgm_em, naive_mle, population_size
from ppgm.measurement import Measurement
from ppgm.mechanisms import GaussianMechanism, PrivacyAccountant, check_release_arguments, noise_generator
from ppgm.rng import as_generator
from ppgm.sampling import round_markov, sample_markov
from ppgm.selection import Selected, mst_select

from .data import decode
from .models import markov_to_pgmpy
from .private import NoisyFactor, NoisyTables, bounded_tables

ESTIMATORS = ("cgm", "naive")


@dataclass
class SyntheticRelease:
    """What :func:`mst_release` returns: the published tables and choices, the fitted model and the
    synthetic records.

    Parameters
    ----------
    synthetic : pandas.DataFrame
        Records from the fitted model (rounded expected counts, or exact draws), states as declared.
    model : pgmpy.models.DiscreteMarkovNetwork
        The fitted network (one factor per measured clique).
    tables : NoisyTables
        Every published table (one-way tables, then the selected pairs) with its noise law.
    selected : list of ppgm.selection.Selected
        The chosen pairs, in order, with how each was chosen (public).
    accountant : PrivacyAccountant
        Its ledger names every published part and its cost.
    fit : object
        The engine's fit (``CGMResult`` or ``FitResult``): history, regularisation chosen.
    private : bool
        False when ``seed`` made the noise and the selection reproducible (not private).
    spent : list of dict
        The release's parts and their zCDP cost.

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
        return {"parts": list(self.spent), "rho": float(sum(p.get("rho", 0.0) for p in self.spent)),
                "epsilon": self.accountant.epsilon_delta(delta) if self.accountant.spent > 0 else 0.0, "delta": delta,
                "private": self.private, "selected": [{"clique": list(s.clique), "reason": s.reason} for s in self.selected]}


def _budget(rho, accountant) -> tuple[float, PrivacyAccountant]:
    if accountant is None:
        if rho is None:
            raise ValueError("rho: give the release's zCDP budget, or an accountant to spend what it has left")
        return checks.positive(rho, "rho"), PrivacyAccountant(rho=rho)
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
        The fit: CGM-EM (default) or the naive MLE, each with its regularisation chosen from the release.
    n_synthetic : int, optional
        Synthetic records to draw; default the estimated record count.
    synthetic : {"round", "sample"}
        ``"round"`` (default, private-pgm's "round"): records whose measured cliques' counts are the
        model's expected counts rounded (:func:`ppgm.sampling.round_markov`); ``"sample"``: i.i.d.
        exact draws (:func:`ppgm.sampling.sample_markov`), with their sampling noise.
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
    check_release_arguments(GaussianMechanism(rho=1.0), accountant)
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data: expected a pandas DataFrame, got {type(data).__name__}")
    names = checks.state_names(state_names)
    columns = list(names)
    if len(columns) < 2:
        raise ValueError(f"state_names: expected the public states of two or more columns, got {columns}")
    absent = [c for c in columns if c not in data.columns]
    if absent:
        raise ValueError(f"state_names: columns {absent} are not in the data; it has {list(data.columns)}")
    estimator = checks.choice(estimator, "estimator", ESTIMATORS)
    synthetic = checks.choice(synthetic, "synthetic", ("round", "sample"))
    fit_rng = as_generator(fit_seed, "fit_seed")
    progress = checks.flag(progress, "progress")
    shares = _split(split)
    total, accountant = _budget(rho, accountant)
    if n_synthetic is not None:
        n_synthetic = checks.count(n_synthetic, "n_synthetic")
    rng = noise_generator(seed)  # None: private noise and selection
    ones = [(v,) for v in columns]
    pairs = list(combinations(columns, 2))
    counted = bounded_tables(data, ones + pairs, state_names=names, individuals=individuals,
                             max_contributions=max_contributions, reweight=reweight, on_unknown=on_unknown, seed=rng)
    rho1, rho2, rho3 = (total * s for s in shares)
    parts = [{"what": f"one-way tables ({len(ones)})", "rho": rho1},
             {"what": f"selection ({len(columns) - 1} rounds of report-noisy-max)", "rho": rho2},
             {"what": f"selected pair tables ({len(columns) - 1})", "rho": rho3}]
    accountant.charge(parts)
    w = counted.contribution
    one_way = GaussianMechanism(rho=rho1).measure(counted.tables[:len(ones)], rng, contribution=w)
    chosen = mst_select(counted.domain, counted.tables[len(ones):], one_way, rho2, sensitivity=w, rng=rng)
    index = {tuple(t.variables): t for t in counted.tables[len(ones):]}
    pair_ms = GaussianMechanism(rho=rho3).measure([index[s.clique] for s in chosen], rng, contribution=w)
    ms: list[Measurement] = list(one_way) + list(pair_ms)
    dom = counted.domain
    N = population_size(ms)
    if estimator == "cgm":
        fit = cgm_em(dom, ms, N=N, progress=progress, seed=fit_rng)
    else:
        fit = naive_mle(dom, ms, N=N, seed=fit_rng)
    n_draw = n_synthetic if n_synthetic is not None else max(int(round(N)), 1)
    draw = round_markov if synthetic == "round" else sample_markov
    records = draw(fit.model, n_draw, seed=fit_rng)
    factors = tuple(NoisyFactor(m.variables, m.values, {v: list(dom.state_names[v]) for v in m.variables}, m.noise, m.scale,
                                m.integer) for m in ms)
    tables = NoisyTables(factors, None, tuple(parts), rng is None)
    return SyntheticRelease(decode(records, dom), markov_to_pgmpy(fit.model), tables, chosen, accountant, fit, rng is None, parts)


__all__ = ["SyntheticRelease", "mst_release", "Selected"]
