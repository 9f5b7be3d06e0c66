"""Learning from records with missing cells: exact expected counts and EM.

A record with holes still says something about every table it touches. Complete-case analysis (what
pgmpy 1.1.2's ``ExpectationMaximization`` does with a partly missing column) throws that away, and is
biased when values are missing at random (MAR: whether a cell is missing may depend on the record's
*observed* values). EM keeps it: the E-step replaces each incomplete record by its posterior over the
missing cells under the current model, the M-step refits the model to the expected tables. Its fixed
points are those of the observed-data likelihood, which is the right objective exactly under MAR; when
missingness depends on the missing value itself (MNAR) EM is biased like every likelihood method that
ignores the missingness mechanism (``tests/test_missing.py`` shows both).

The E-step is exact on the model's junction tree and vectorised, and its cost follows the holes:
complete records are counted directly; incomplete ones are grouped by their distinct (pattern, observed
values) rows, and each is calibrated on the tree reduced to its missing cells
(:class:`ppgm.inference.evidence.ReducedRows`: a few cells per clique instead of the clique's table, all
rows in one ragged array), or, when that would cost about as much, as a column of the full tree's
:meth:`ppgm.inference.junction_tree.JunctionTree.calibrate_columns` under its evidence. Missing cells are
coded ``-1`` (:data:`MISSING`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core import checks
from ..core.executor import Blocks, RecordBlock
from ..core.progress import ConvergenceWarning, progress_bar
from ..core.rng import as_generator
from ..factors.domain import Domain
from ..factors.factor import Factor
from ..inference.evidence import REDUCED_CHUNK, REDUCED_COST, ReducedRows, evidence_mask, reduced_cells, seen_counts
from ..inference.evidence import distinct_rows as _distinct_rows
from ..inference.junction_tree import JunctionTree
from ..inference.tables import count_block
from ..models.bayes import BayesianNetwork
from ..models.markov import MarkovNetwork
from .mle import MarginalOracle, fit_marginals

MISSING = -1
CHUNK_CELLS = 2**22  # clique cells x distinct rows calibrated at once (32 MB per float64 copy)
GAUGE_L2 = 1e-6  # records' worth of L2 added to an unpenalised Markov fit: it only fixes the gauge, so that
# Newton's method applies (third-order chain 8 x 6, N = 5,000: L-BFGS at l2 = 0 stopped unconverged after 1,000
# iterations in 3.8 s; Newton at 1e-6 / N converged in 12 steps, 0.13 s, the same KL to 4 digits)


def check_partial_records(records, domain: Domain, argument: str = "records") -> np.ndarray:
    """``records`` as an ``(N, len(domain))`` int64 array with :data:`MISSING` (-1) for missing cells:
    NaN in a float array becomes -1; other codes must lie in ``0 .. card-1``. The input is not modified.

    Parameters
    ----------
    records : array-like
    domain : Domain
    argument : str
        The name used in error messages.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> check_partial_records([[0, np.nan], [1, 2]], Domain(("A", "B"), (2, 3))).tolist()
    [[0, -1], [1, 2]]
    """
    arr = np.asarray(records)
    if arr.ndim != 2 or arr.shape[1] != len(domain):
        raise ValueError(f"{argument}: expected an array of shape (N, {len(domain)}) with columns "
                         f"{list(domain.variables)}, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        hole = np.isnan(arr)
        if np.isinf(arr).any():
            raise ValueError(f"{argument}: contains inf; expected state codes or NaN for a missing cell")
        filled = np.where(hole, 0.0, arr)
        if not np.all(filled == np.round(filled)):
            raise ValueError(f"{argument}: expected integer state codes (NaN for missing), got non-integral floats")
        arr = np.where(hole, MISSING, filled).astype(np.int64)
    elif arr.dtype.kind in "iub":
        arr = arr.astype(np.int64)
    else:
        raise ValueError(f"{argument}: expected integer state codes (-1 or NaN for missing), got dtype {arr.dtype}")
    cards = np.asarray(domain.cards)
    bad = (arr < MISSING) | (arr >= cards)
    if bad.any():
        j = int(np.flatnonzero(bad.any(axis=0))[0])
        raise ValueError(f"{argument}: column {domain.variables[j]!r} has codes outside -1 (missing) .. {cards[j] - 1}")
    return arr


@dataclass(frozen=True)
class ExpectedTables:
    """The E-step's output.

    Attributes
    ----------
    tables : list of numpy.ndarray
        Expected counts of each requested scope's table (axes in the scope's order).
    log_likelihood : float
        Log-probability of the observed cells, summed over records (log P of the observed part of each).
    n_records, n_complete, n_distinct : int
        Records, complete records, and distinct incomplete rows (the columns calibrated).
    """

    tables: list
    log_likelihood: float
    n_records: int
    n_complete: int
    n_distinct: int


def expected_tables(model: MarkovNetwork, records, scopes: Sequence[Sequence], tree: JunctionTree | None = None,
                    chunk_cells: int = CHUNK_CELLS) -> ExpectedTables:
    """Expected contingency tables of ``scopes`` given partly observed ``records`` under ``model``,
    and the observed cells' log-likelihood: exact (junction tree), complete records counted directly,
    incomplete ones calibrated once per distinct row on the tree reduced to its missing cells.

    Parameters
    ----------
    model : MarkovNetwork
    records : array-like
        ``(N, d)`` state codes, -1 or NaN for a missing cell (:func:`check_partial_records`).
    scopes : sequence of tuples
        Tables to return; each must lie inside one clique of ``tree``.
    tree : JunctionTree, optional
        Built over the model's scopes and ``scopes`` (default: built here).
    chunk_cells : int
        Clique cells times distinct rows calibrated at once on the full tree (memory bound).

    Returns
    -------
    ExpectedTables

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 2))
    >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[0.4, 0.1], [0.1, 0.4]]))])
    >>> e = expected_tables(m, [[0, -1], [1, 1]], [("A", "B")])
    >>> e.tables[0].round(3).tolist()          # the first row splits 0.8 / 0.2
    [[0.8, 0.2], [0.0, 1.0]]
    """
    dom = model.domain
    wanted: list[tuple] = [tuple(s) for s in scopes]
    for s in wanted:
        dom.check(s, "scopes")
    if tree is None:
        tree = JunctionTree.build(dom, list(model.scopes) + wanted)
    grouped = _Grouped.of(tree, check_partial_records(records, dom), checks.count(chunk_cells, "chunk_cells"))
    return grouped.expected(model, wanted)


@dataclass
class _Grouped:
    """Records grouped once for every E-step of a fit: the complete rows' clique counts (they do not
    depend on the model), the distinct incomplete rows with their multiplicities, and each row's path:
    the tree reduced to the row's missing cells (:class:`ppgm.inference.evidence.ReducedRows`, in chunks
    whose index arrays are kept when they fit in memory) or, where that would cost about as much as the
    full tree, a column of the full tree's calibration under the row's evidence mask."""

    tree: JunctionTree
    complete_counts: np.ndarray  # complete rows' clique counts, and those of the cliques the reduced rows see entirely
    n_records: int
    n_complete: int
    rows: np.ndarray
    weights: np.ndarray
    step: int
    full: np.ndarray  # rows (indices into ``rows``) calibrated on the full tree
    masks: list  # their evidence masks, chunk by chunk, when they fit in memory
    reduced: list  # (row indices, ReducedRows or None) per chunk of the reduced path

    MASK_BUDGET = 2**27  # bytes of evidence masks kept between E-steps
    REDUCED_BUDGET = 2**29  # bytes of reduced index arrays kept between E-steps (about 20 bytes a reduced cell)
    REDUCED_CHUNK = REDUCED_CHUNK  # reduced cells calibrated at once
    REDUCED_COST = REDUCED_COST  # a row takes the full tree when its reduced cells times this reach the tree's cells

    @classmethod
    def of(cls, tree: JunctionTree, rec: np.ndarray, chunk_cells: int = CHUNK_CELLS, path: str = "auto") -> "_Grouped":
        dom, plan = tree.domain, tree._plan()
        cells = int(plan["sizes"].sum())
        complete = (rec >= 0).all(axis=1)
        full = rec[complete]
        counts = np.concatenate(count_block(full, dom, tree.cliques) or []).astype(float) if len(full) else np.zeros(cells)
        partial = rec[~complete]
        rows, weights = _distinct_rows(partial, max(dom.cards))
        size = reduced_cells(tree, rows)
        if path == "tree":
            on_tree = np.ones(len(rows), bool)
        elif path == "reduced":
            on_tree = np.zeros(len(rows), bool)
        else:
            on_tree = size * cls.REDUCED_COST >= cells
        out = cls(tree, counts, len(rec), int(complete.sum()), rows, weights.astype(float),
                  max(1, chunk_cells // max(cells, 1)), np.flatnonzero(on_tree), [], [])
        if cells * len(out.full) <= cls.MASK_BUDGET:
            out.masks = [out._mask(out.full[a:a + out.step]) for a in range(0, len(out.full), out.step)]
        idx = np.flatnonzero(~on_tree)
        if len(idx):  # the cliques these rows see entirely: counted once, as complete rows are
            every = len(idx) == len(rows)
            out.complete_counts = out.complete_counts + seen_counts(tree, rows if every else rows[idx], out.weights[idx])
            ends = np.searchsorted(np.cumsum(size[idx]), np.arange(1, 1 + int(size[idx].sum()) // cls.REDUCED_CHUNK + 1)
                                   * cls.REDUCED_CHUNK, side="right")
            bounds = np.unique(np.concatenate([[0], ends, [len(idx)]]))
            held = 0
            for a, b in zip(bounds[:-1], bounds[1:]):  # the first chunks' index arrays kept, up to the budget
                red = ReducedRows(tree, rows[idx[a:b]]) if held <= cls.REDUCED_BUDGET else None
                held += red.nbytes() if red is not None else 0
                out.reduced.append((idx[a:b], red if held <= cls.REDUCED_BUDGET else None))
        return out

    def _mask(self, which: np.ndarray) -> np.ndarray:
        """Which clique cells agree with each of the distinct rows ``which``."""
        return evidence_mask(self.tree, self.rows[which])

    def _on_tree(self, psi: np.ndarray, which: np.ndarray, masks: list | None = None) -> tuple:
        """Expected clique counts and summed log Z of the rows ``which``, each a column of the full
        tree's calibration under its evidence mask (in chunks)."""
        counts, ll = np.zeros(len(psi)), 0.0
        for k, a in enumerate(range(0, len(which), self.step)):
            rows = which[a:a + self.step]
            keep = masks[k] if masks else self._mask(rows)
            lz, probs = self.tree.calibrate_columns(psi, keep)
            _check_finite(lz, self.rows[rows])
            w = self.weights[rows]
            ll += float(w @ lz)
            counts += probs @ w
        return counts, ll

    def counts(self, model: MarkovNetwork, log_z: float | None = None) -> tuple:
        """The E-step on these records: expected counts of every clique cell (flat), the observed
        cells' log-likelihood, and the records, complete records and distinct incomplete rows.
        ``log_z``: the model's log partition function when known (0 for a Bayesian network's CPTs)."""
        tree = self.tree
        psi = np.concatenate([p.ravel() for p in tree._potentials(model)])
        if log_z is None:
            log_z = tree.calibrate_flat(psi).log_z
        with np.errstate(invalid="ignore"):  # -inf potentials on cells no complete row has
            ll = float(np.where(self.complete_counts > 0, psi * self.complete_counts, 0.0).sum())
        clique_counts, ll_rows = self._on_tree(psi, self.full, self.masks)
        clique_counts += self.complete_counts
        ll += ll_rows
        for which, red in self.reduced:
            red = red if red is not None else ReducedRows(tree, self.rows[which])
            lz, beliefs, exact = red.calibrate(psi)
            w = self.weights[which]
            if not exact.all():  # a range too wide for the scaled schedule: those rows on the full tree's log schedule
                wide = which[~exact]
                c, l = self._on_tree(psi, wide)
                seen = seen_counts(tree, self.rows[wide], self.weights[wide])  # already in the full tree's counts
                clique_counts += c - seen
                with np.errstate(invalid="ignore"):
                    ll += l - float(np.where(seen > 0, psi * seen, 0.0).sum())
                w = np.where(exact, w, 0.0)
                beliefs = np.where(np.repeat(exact[red.block_row], red.block_sizes), beliefs, 0.0)
            _check_finite(np.where(exact, lz, 0.0), self.rows[which])
            ll += float(w @ np.where(exact, lz, 0.0))
            clique_counts += np.bincount(red.cells, weights=beliefs * np.repeat(w[red.block_row], red.block_sizes),
                                         minlength=len(psi))
        ll -= self.n_records * log_z
        if not np.isfinite(ll):
            raise ValueError("records: a record's observed cells have probability zero under the model; smooth the model (pseudo-counts)")
        return clique_counts, ll, self.n_records, self.n_complete, len(self.rows)

    def expected(self, model: MarkovNetwork, scopes: Sequence[tuple], log_z: float | None = None) -> ExpectedTables:
        return _tables(self.tree, self.counts(model, log_z), scopes)


def _check_finite(lz: np.ndarray, rows: np.ndarray) -> None:
    if not np.all(np.isfinite(lz)):
        bad = rows[int(np.flatnonzero(~np.isfinite(lz))[0])]
        raise ValueError(f"records: a record's observed cells have probability zero under the model "
                         f"(codes {bad.tolist()}, -1 missing); smooth the model (pseudo-counts)")


def _tables(tree: JunctionTree, parts: tuple, scopes: Sequence[tuple]) -> ExpectedTables:
    """:class:`ExpectedTables` of ``scopes`` from the (summed) output of :meth:`_Grouped.counts`."""
    clique_counts, ll, n, n_complete, n_distinct = parts
    plan = tree._plan()
    tables = []
    for s in scopes:
        h = tree.home(s)
        start, size = plan["starts"][h], plan["sizes"][h]
        tables.append(Factor(tree.cliques[h], clique_counts[start:start + size].reshape(plan["shapes"][h])).sum_to(s).values)
    return ExpectedTables(tables, float(ll), int(n), int(n_complete), int(n_distinct))


def _block_codes(block, domain: Domain) -> np.ndarray:
    return check_partial_records(block.codes if isinstance(block, RecordBlock) else block, domain)


def _group_block(block, tree: JunctionTree) -> _Grouped:
    return _Grouped.of(tree, _block_codes(block, tree.domain))


def _block_counts(grouped: _Grouped, model: MarkovNetwork, log_z: float | None = None) -> tuple:
    return grouped.counts(model, log_z)


def _available_block(block, domain: Domain, families: Sequence[tuple]) -> tuple:
    """Per block: cells observed per column, and each family's counts over the rows that see all of it."""
    rec = _block_codes(block, domain)
    out = []
    for fam in families:
        sub = rec[:, [domain.index(u) for u in fam]]
        sub = sub[(sub >= 0).all(axis=1)]
        shape = domain.shape(fam)
        out.append(np.bincount(np.ravel_multi_index(sub.T, shape), minlength=int(np.prod(shape))).reshape(shape).astype(float)
                   if len(sub) else np.zeros(shape))
    return (rec >= 0).sum(axis=0), len(rec), out


class _Source:
    """The records an EM fit reads, grouped once: an array in this process, or ``Blocks`` (for instance
    Dask partitions) grouped where they live, each E-step a reduction over the blocks."""

    def __init__(self, records, domain: Domain, tree: JunctionTree, families: Sequence[tuple]) -> None:
        self.tree = tree
        self.blocks: Any = None
        self.grouped: Any = None
        if isinstance(records, Blocks):
            self.blocks = records
            seen, self.n, self.available = records.reduce(_available_block, domain=domain, families=list(families))
            self.grouped = records.map(_group_block, tree=tree).persist()
        else:
            rec = check_partial_records(records, domain)
            self.blocks = None
            seen, self.n, self.available = _available_block(rec, domain, families)
            self.grouped = _Grouped.of(tree, rec)
        if self.n == 0:
            raise ValueError("records: no records")
        self.latent = np.asarray(seen) == 0

    def expected(self, model: MarkovNetwork, scopes: Sequence[tuple], log_z: float | None = None) -> ExpectedTables:
        if self.blocks is None:
            return self.grouped.expected(model, scopes, log_z)
        return _tables(self.tree, self.grouped.reduce(_block_counts, model=model, log_z=log_z), scopes)


@dataclass(frozen=True)
class MissingEMResult:
    """Outcome of :func:`em_bayesian` / :func:`em_markov`.

    Attributes
    ----------
    model : BayesianNetwork or MarkovNetwork
    log_likelihood : float
        Observed-data log-likelihood of the returned model (nats, summed over records).
    converged : bool
    history : list of dict
        Per iteration: ``log_likelihood`` (of the model entering it), ``objective`` (the same plus the
        log-prior / minus the penalty: what EM increases), ``change`` (relative change of the objective).
    counts : list of numpy.ndarray
        The last E-step's expected tables (BN: one per family, parents then node; MN: one per scope).
    """

    model: object
    log_likelihood: float
    converged: bool
    history: list = field(default_factory=list)
    counts: list = field(default_factory=list)


def _em(step: Callable, init, max_iter: int, tol: float, progress: bool, callback, desc: str) -> tuple:
    """The EM loop shared by both model kinds: ``step(model) -> (next model, E-step, objective)``."""
    model, history, converged, last = init, [], False, None
    bar = progress_bar(total=max_iter, desc=desc, enabled=progress)
    try:
        for t in range(max_iter):
            new, e, objective = step(model)
            change = abs(objective - last) / max(abs(objective), 1.0) if last is not None else np.inf
            history.append({"iteration": t, "log_likelihood": e.log_likelihood, "objective": objective, "change": change})
            bar.update(1)
            if callback is not None:
                callback(t, new, history[-1])
            last = objective
            model = new
            if change < tol:
                converged = True
                break
    finally:
        bar.close()
    if not converged:  # stacklevel 3: the user's call of em_bayesian / em_markov
        warnings.warn(f"EM with missing values: stopped after {max_iter} iterations before the objective's relative "
                      f"change fell below tol={tol}; see the result's history", ConvergenceWarning, stacklevel=3)
    return model, history, converged, e


def _dirichlet_map(counts: np.ndarray, pseudo_count: float) -> np.ndarray:
    """CPT rows (last axis) from expected counts plus a pseudo-count per cell (MAP of a Dirichlet
    prior of ``pseudo_count + 1``); a row seen nowhere and unsmoothed is uniform."""
    c = counts + pseudo_count
    tot = c.sum(axis=-1, keepdims=True)
    return np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), 1.0 / c.shape[-1])


def em_bayesian(domain: Domain, parents: Mapping, records, pseudo_count: float = 1.0, init: BayesianNetwork | None = None,
                max_iter: int = 200, tol: float = 1e-8, seed=0, progress: bool = True, callback=None) -> MissingEMResult:
    """CPTs of a known DAG from records with missing cells, by EM (exact E-step).

    Each iteration computes every family's expected table given the observed cells
    (:func:`expected_tables`) and sets each CPT row to its expected counts plus ``pseudo_count`` per
    cell, normalised: the MAP estimate under a Dirichlet prior, which EM climbs monotonically.

    Parameters
    ----------
    domain : Domain
    parents : mapping
        ``{node: tuple of parents}``.
    records : array-like or Blocks
        ``(N, d)`` codes in domain order, -1 or NaN for missing, or ``ppgm.core.executor`` blocks of them
        (e.g. Dask partitions: each E-step is a reduction over the blocks, which are grouped once where
        they live). A column with no observed cell is latent: its CPT (and its children's) start from a seeded random draw, since the symmetric start
        is a fixed point of EM.
    pseudo_count : float
        Added to every expected count (0: maximum likelihood; then a parent configuration never seen
        gets a uniform row).
    init : BayesianNetwork, optional
        Starting CPTs (default: available-case estimates, random for latent nodes).
    max_iter, tol
        EM stops when the objective's relative change falls below ``tol``; at ``max_iter`` it warns.
    seed : int or numpy.random.Generator
        Starting CPTs of latent nodes (same seed, same answer).
    progress : bool
    callback : callable, optional
        ``callback(iteration, model, record)`` after each iteration.

    Returns
    -------
    MissingEMResult

    Examples
    --------
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> from ppgm.inference.sampling import sample_bayes
    >>> bn = random_bayesian_network(4, 2, seed=0)
    >>> x = sample_bayes(bn, 2000, seed=1).astype(float)
    >>> x[::3, 1] = np.nan                                       # a third of one column missing
    >>> res = em_bayesian(bn.domain, bn.parents, x, progress=False)
    >>> res.converged, res.history[-1]["objective"] >= res.history[0]["objective"]
    (True, True)
    """
    pseudo_count = checks.non_negative(pseudo_count, "pseudo_count", checks.MAX_PENALTY)
    max_iter, tol = checks.count(max_iter, "max_iter"), checks.positive(tol, "tol")
    progress = checks.flag(progress, "progress")
    callback = checks.callback(callback)
    parents = {v: tuple(parents.get(v, ())) for v in domain.variables}
    families = [parents[v] + (v,) for v in domain.variables]
    if init is not None and (not isinstance(init, BayesianNetwork) or init.domain != domain):
        raise TypeError("init: expected a BayesianNetwork on the records' domain")
    tree = JunctionTree.build(domain, families)
    source = _Source(records, domain, tree, families)
    if init is None:
        init = _available_case_bn(domain, parents, source, pseudo_count, as_generator(seed))

    def step(bn: BayesianNetwork):
        e = source.expected(bn.to_markov(), families, log_z=0.0)  # CPTs: normalised by construction
        cpts = {v: _dirichlet_map(t, pseudo_count) for v, t in zip(domain.variables, e.tables)}
        prior = sum(float(pseudo_count * np.log(np.maximum(bn.cpts[v], 1e-300)).sum()) for v in domain.variables) \
            if pseudo_count else 0.0
        return bn._with_normalised(cpts), e, e.log_likelihood + prior

    model, history, converged, e = _em(step, init, max_iter, tol, progress, callback, "EM (missing values)")
    final = source.expected(model.to_markov(), [], log_z=0.0).log_likelihood
    return MissingEMResult(model, final, converged, history, e.tables)


def _latent_names(domain: Domain, source: _Source) -> set:
    return {v for v, hidden in zip(domain.variables, source.latent) if hidden}


def _available_case_bn(domain: Domain, parents: Mapping, source: _Source, pseudo_count: float,
                       rng: np.random.Generator) -> BayesianNetwork:
    """Each CPT from the records whose family is fully observed (plus the pseudo-count); a latent node
    and its children's rows over it drawn from Dirichlet(1) (a symmetric start does not move)."""
    latent = _latent_names(domain, source)
    cpts = {}
    for v, counts in zip(domain.variables, source.available):
        fam = parents[v] + (v,)
        shape = domain.shape(fam)
        if latent & set(fam):
            cpts[v] = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
        else:
            cpts[v] = _dirichlet_map(counts, max(pseudo_count, 1.0))
    return BayesianNetwork(domain, parents, cpts)


def em_markov(domain: Domain, scopes: Sequence[Sequence], records, l2: float = 0.0, pseudo_count: float = 1.0,
              init: MarkovNetwork | None = None, max_iter: int = 200, tol: float = 1e-8, seed=0, progress: bool = True,
              callback=None) -> MissingEMResult:
    """Log-potentials of a Markov network (one table per scope) from records with missing cells, by EM:
    the E-step's expected tables (exact) are fitted by :func:`ppgm.learners.mle.fit_marginals` (Newton / L-BFGS,
    warm-started). With complete records it is one maximum-likelihood fit (:func:`fit_markov_records`).

    Parameters
    ----------
    domain : Domain
    scopes : sequence of tuples
        The network's factors (cliques).
    records : array-like or Blocks
        ``(N, d)`` codes, -1 or NaN for missing, or blocks of them (as :func:`em_bayesian`); a column
        with no observed cell is latent (its factors start from seeded noise).
    l2 : float
        Weight of ``l2 ||theta||^2`` per record (:func:`ppgm.learners.mle.fit_marginals`); at least
        :data:`GAUGE_L2` / N, which fixes the gauge for Newton's method and changes nothing else.
    pseudo_count : float
        Records spread uniformly over every table's cells before fitting (consistent across tables;
        keeps log-potentials finite where a cell is never seen).
    init : MarkovNetwork, optional
    max_iter, tol, seed, progress, callback
        As :func:`em_bayesian`.

    Returns
    -------
    MissingEMResult

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> from ppgm.inference.sampling import sample_markov
    >>> mn = third_order_chain(5, 2, seed=0)
    >>> x = sample_markov(mn, 3000, seed=1).astype(float)
    >>> x[::4, 2] = np.nan
    >>> res = em_markov(mn.domain, mn.scopes, x, progress=False)
    >>> res.converged, len(res.model.factors) == len(mn.factors)
    (True, True)
    """
    cliques: list[tuple] = [tuple(s) for s in scopes]
    for s in cliques:
        domain.check(s, "scopes")
    scopes = cliques
    l2 = checks.non_negative(l2, "l2")
    pseudo_count = checks.non_negative(pseudo_count, "pseudo_count", checks.MAX_PENALTY)
    max_iter, tol = checks.count(max_iter, "max_iter"), checks.positive(tol, "tol")
    progress = checks.flag(progress, "progress")
    callback = checks.callback(callback)
    if init is not None and (not isinstance(init, MarkovNetwork) or init.domain != domain
                             or [tuple(s) for s in init.scopes] != scopes):
        raise TypeError("init: expected a MarkovNetwork on the records' domain with the given scopes")
    oracle = MarginalOracle(domain, cliques)
    tree = oracle.tree if oracle.tree is not None else JunctionTree.build(domain, cliques)
    source = _Source(records, domain, tree, [])
    if init is None:
        rng = as_generator(seed)
        latent = _latent_names(domain, source)
        init = MarkovNetwork(domain, [Factor(s, rng.normal(0.0, 0.5, domain.shape(s)) if latent & set(s)
                                             else np.zeros(domain.shape(s))) for s in cliques])
    n = float(source.n)

    def step(mn: MarkovNetwork):
        e = source.expected(mn, cliques)
        targets = _smoothed(domain, cliques, e.tables, n, pseudo_count)
        fit = fit_marginals(domain, targets, l2=max(l2, GAUGE_L2 / n), init=mn, oracle=oracle, warn=False)
        theta2 = sum(float((f.values ** 2).sum()) for f in mn.factors)
        return fit.model, e, e.log_likelihood - n * l2 * theta2

    model, history, converged, e = _em(step, init, max_iter, tol, progress, callback, "EM (missing values)")
    final = source.expected(model, []).log_likelihood
    return MissingEMResult(model, final, converged, history, e.tables)


def _smoothed(domain: Domain, scopes: Sequence[tuple], tables: Sequence[np.ndarray], n: float, pseudo_count: float) -> list[Factor]:
    """Probability tables (counts + ``pseudo_count`` records spread uniformly) / (n + pseudo_count)."""
    return [Factor(s, (t + pseudo_count / t.size) / (n + pseudo_count)) for s, t in zip(scopes, tables)]


def fit_markov_records(domain: Domain, scopes: Sequence[Sequence], records, l2: float = 0.0, pseudo_count: float = 1.0,
                       max_iter: int = 1000, tol: float = 1e-8):
    """Maximum-likelihood (optionally L2- or pseudo-count-regularised) log-potentials of a Markov network
    from complete records: their tables, smoothed, fitted by :func:`ppgm.learners.mle.fit_marginals`.

    Parameters
    ----------
    domain : Domain
    scopes : sequence of tuples
    records : array-like
        ``(N, d)`` codes, no missing cell (use :func:`em_markov` otherwise).
    l2, pseudo_count
        As :func:`em_markov`.
    max_iter, tol
        The fit's limits (:func:`ppgm.learners.mle.fit_marginals`).

    Returns
    -------
    ppgm.learners.mle.FitResult

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> from ppgm.inference.sampling import sample_markov
    >>> mn = third_order_chain(5, 2, seed=0)
    >>> fit = fit_markov_records(mn.domain, mn.scopes, sample_markov(mn, 5000, seed=1))
    >>> fit.converged
    True
    """
    rec = check_partial_records(records, domain)
    if (rec < 0).any():
        raise ValueError("records: has missing cells; fit with em_markov (EM over the missing values)")
    if len(rec) == 0:
        raise ValueError("records: no records")
    cliques: list[tuple] = [tuple(s) for s in scopes]
    for s in cliques:
        domain.check(s, "scopes")
    tables = [t.reshape(domain.shape(c)).astype(float) for c, t in zip(cliques, count_block(rec, domain, cliques) or [])]
    return fit_markov_tables(domain, cliques, tables, l2, pseudo_count, max_iter, tol)


def fit_markov_tables(domain: Domain, scopes: Sequence[tuple], tables: Sequence[np.ndarray], l2: float = 0.0,
                      pseudo_count: float = 1.0, max_iter: int = 1000, tol: float = 1e-8):
    """Maximum-likelihood log-potentials of a Markov network from exact count tables (one per scope, the
    same record total): smoothed by ``pseudo_count`` records spread uniformly, fitted by
    :func:`ppgm.learners.mle.fit_marginals` with at least :data:`GAUGE_L2` / N of L2.

    Parameters
    ----------
    domain : Domain
    scopes : sequence of tuples
    tables : sequence of numpy.ndarray
        Counts, axes in each scope's order.
    l2, pseudo_count
        As :func:`em_markov`.
    max_iter, tol
        The fit's limits.

    Returns
    -------
    ppgm.learners.mle.FitResult

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 2))
    >>> fit = fit_markov_tables(d, [("A", "B")], [np.array([[30.0, 10.0], [10.0, 50.0]])], pseudo_count=0.0)
    >>> from ppgm.inference.marginals import infer
    >>> infer(fit.model).marginal(("A", "B")).values.round(4).tolist()
    [[0.3, 0.1], [0.1, 0.5]]
    """
    l2 = checks.non_negative(l2, "l2")
    pseudo_count = checks.non_negative(pseudo_count, "pseudo_count", checks.MAX_PENALTY)
    n = float(np.sum(tables[0]))
    return fit_marginals(domain, _smoothed(domain, [tuple(c) for c in scopes], tables, n, pseudo_count),
                         l2=max(l2, GAUGE_L2 / n), max_iter=max_iter, tol=tol)
