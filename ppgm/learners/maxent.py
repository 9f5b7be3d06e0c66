"""Maximum-entropy learning from aggregated tables by persistent contrastive divergence.

The model (Gilotte, Ben Yahmed, Rohde) over categorical features x and a binary label y is

    pi(x, y)  ~  exp( theta0 * y + sum over tables t of  mu_t[x_t] + y * theta_t[x_t] ),

one table per aggregated single feature or feature pair (x_t the cell, or hash bucket, of x in
table t). Its sufficient statistics are exactly the aggregates (counts d, label sums c), and
P(y = 1 | x) = sigmoid(theta0 + sum_t theta_t[x_t]) is a logistic model with a quadratic kernel.

Training is persistent contrastive divergence (Appendix C of the paper) with:
- persistent Gibbs chains updated by one sweep per step (label first, then every feature),
  vectorised across chains: each feature's conditional logits for all chains come from one dense
  product of the chains' one-hot matrix with a block of the interaction matrix;
- the label marginalised in the estimate of E[c] (sigmoid weights instead of sampled labels);
- the rescaled pseudo-gradient for theta (Eq. 6) as the default, diagonal preconditioning by the
  (approximate) inverse Hessian diagonal, separate L2 penalties and step sizes for mu and theta
  (mu's sized by the tables' coupling measured on the chains, ``ppgm.learners.maxent_coupling``);
- an explicit label intercept theta0 (so the base rate matches the aggregates) and chains whose
  statistics are scaled to the record count N (so the total count matches);
- noisy aggregates modelled through the noise-observation factor: each step's targets are the
  posterior means E[d | noisy d] and E[c | noisy c] under a Gaussian approximation of the model's
  own prediction, rather than the noisy counts themselves, and each noisy cell's curvature is scaled
  by its share of the observation (Fisher scoring), so that PCD converges there as on exact tables;
- the theta penalty chosen from the tables themselves (``ppgm.learners.maxent_rule``): a parametric bootstrap
  of their sampling noise, and of their privacy noise when they were released with it.

The defaults and the measurements behind them: ``docs/explain/maxent.md``.
"""

from __future__ import annotations

import copy
import functools
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..core import checks
from ..core.executor import Executor, InProcess
from ..core.progress import ConvergenceWarning, progress_bar
from ..core.rng import as_generator
from ..factors.domain import Domain
from ..models.measurement import Measurement
from . import maxent_exact, maxent_rule
from .maxent_coupling import COUPLING_CHAINS, COUPLING_EVERY, mu_coupling

#: Default step size times the number of tables plus one (see ``fit_maxent``'s ``step_mu``).
DEFAULT_STEP = 1.5
GAIN_TOL = 2e-3  # nats per record: a fit one Newton step from which would gain more is reported unconverged
MIN_WINDOW = 6
GAIN_CHAINS = 2000  # chains the convergence test reads
MAX_CHAINS = 10**7  # persistent chains: 10^7 chains of 15 features hold 1.2 GB
#: Heavy-ball momentum of mu's default step on a noisy cell, times 1 - w (w: the cell's share of its observation,
#: so none on exact cells): mu travels far towards noisy tables, slowly along weakly pinned directions.
#: docs/explain/maxent.md, "Momentum on the noise-dominated cells" (0.8 lost on tuning releases; on exact tables
#: a uniform 0.4-0.5 diverged).
MU_MOMENTUM = 0.5
#: Default budgets: chains x steps. Exact tables: 8,000 x 300 (tuned on a validation split of Adult's train rows).
#: Noisy tables: the same budget as 4,000 x 600, the noisy cells' prior keeping 8,000 chains' Monte Carlo variance
#: (``prior_chains``): there mu travels far and steps, not Monte Carlo precision, limit it. docs/explain/maxent.md,
#: "Half the chains, twice the steps".
EXACT_CHAINS, EXACT_STEPS = 8_000, 300
#: Exact tables: PCD tests its convergence every ``CHECK_STEPS`` steps and stops once one more Newton step would gain
#: at most ``SETTLE_TOL`` nats per record, or at ``EXACT_MAX_STEPS``; docs/explain/maxent.md, "When PCD stops".
CHECK_STEPS, SETTLE_TOL, EXACT_MAX_STEPS = EXACT_STEPS, 2.5e-4, 6 * EXACT_STEPS
#: Exact tables over features whose joint has at most this many configurations are fitted by Newton's method
#: on the exact likelihood (every configuration enumerated) instead of PCD: no chains to mix, no Monte Carlo
#: noise. docs/explain/maxent.md, "Small feature spaces: the exact fit".
ENUMERATE_CELLS = 2**16
NOISY_CHAINS, NOISY_STEPS = 4_000, 600


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


@dataclass
class MaxEntLayout:
    """Where every table's parameters live in the flat vectors mu and theta.

    ``cell_slots[t]`` maps the cells of table t (C order over its scope) to global slots (its
    buckets, for a hashed table).
    """

    domain: Domain
    scopes: tuple
    offsets: np.ndarray
    sizes: np.ndarray
    cell_slots: tuple

    @classmethod
    def from_tables(cls, domain: Domain, tables: Sequence[Measurement]) -> "MaxEntLayout":
        scopes, sizes, slots = [], [], []
        offset = 0
        for k, t in enumerate(tables):
            scope = domain.check(t.variables, f"tables[{k}].variables")
            if len(scope) not in (1, 2):
                raise ValueError(f"tables[{k}]: expected a single feature or a pair, got {scope}")
            shape = domain.shape(scope)
            if t.buckets is not None:
                if t.buckets.shape != shape:
                    raise ValueError(f"tables[{k}]: buckets of shape {t.buckets.shape}, expected {shape} for {scope}")
                local, size = t.buckets.ravel(), t.values.size
            else:
                if t.shape != shape:
                    raise ValueError(f"tables[{k}]: values of shape {t.shape}, expected {shape} for {scope}")
                size = int(np.prod(shape))
                local = np.arange(size)
            scopes.append(scope)
            sizes.append(size)
            slots.append(local + offset)
            offset += size
        size_array = np.array(sizes, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(size_array)[:-1]]).astype(np.int64)
        layout = cls(domain, tuple(scopes), offsets, size_array, tuple(slots))
        layout._prepare()
        return layout

    def _prepare(self) -> None:
        dom = self.domain
        F = len(dom)
        first = np.array([dom.index(s[0]) for s in self.scopes])
        second = np.array([dom.index(s[1]) if len(s) == 2 else F for s in self.scopes])
        cards = np.array(dom.cards + (1,))
        self._first, self._second, self._stride = first, second, cards[second]
        self._cell_offsets = np.concatenate([[0], np.cumsum([len(s) for s in self.cell_slots])[:-1]]).astype(np.int64)
        self._flat_slots = np.concatenate(self.cell_slots) if self.cell_slots else np.zeros(0, np.int64)
        # Without hashed tables a cell is its slot, and the cells of all tables are one product
        # (T x F) @ codes: a float64 matmul, exact for integers below 2^53 (4x faster than gathers).
        self._direct = bool(np.array_equal(self._flat_slots, np.arange(self._flat_slots.size))) and self._flat_slots.size < 2**52
        M = np.zeros((len(self.scopes), F + 1))
        np.add.at(M, (np.arange(len(self.scopes)), first), self._stride.astype(float))
        np.add.at(M, (np.arange(len(self.scopes)), second), 1.0)
        self._cell_matrix = np.ascontiguousarray(M[:, :F])

    @property
    def n_slots(self) -> int:
        return int(self.sizes.sum())

    def slots(self, codes: np.ndarray) -> np.ndarray:
        """Global slot of every record in every table, shape (N, T); -1 where a code is -1 (unseen)."""
        return self.slots_by_table(codes).T

    def slots_by_table(self, codes: np.ndarray) -> np.ndarray:
        """:meth:`slots` laid out table by table, shape (T, N), C-contiguous (each table's gather and
        the sums over tables then run along contiguous rows)."""
        codes_t = np.asarray(codes).T
        if self._direct and codes_t.size and codes_t.min() >= 0:
            cells = self._cell_matrix @ codes_t.astype(np.float64)
            cells += self._cell_offsets[:, None]
            return cells.astype(np.int64)
        ext = np.concatenate([codes_t, np.zeros((1, codes_t.shape[1]), codes_t.dtype)], axis=0)
        a, b = ext[self._first], ext[self._second]
        cells = a * self._stride[:, None] + b
        cells += self._cell_offsets[:, None]
        if codes_t.size and codes_t.min() < 0:
            unseen = (a < 0) | (b < 0)
            return np.where(unseen, -1, self._flat_slots[np.where(unseen, 0, cells)])
        return self._flat_slots[cells]

    def enumerated(self) -> tuple | None:
        """Every configuration of the features (rows, C order) and the configurations x slots incidence
        matrix (``maxent_exact.incidence``), when there are at most ``ENUMERATE_CELLS``; else None. Built once."""
        if not hasattr(self, "_enumerated"):
            cards = self.domain.cards
            if float(np.prod(cards, dtype=float)) > ENUMERATE_CELLS:
                self._enumerated = None
            else:
                configs = np.indices(cards, dtype=np.int64).reshape(len(cards), -1).T
                self._enumerated = (configs, maxent_exact.incidence(self.slots_by_table(configs), self.n_slots))
        return self._enumerated

    def __getstate__(self) -> dict:
        # the sampler and the enumeration are caches, rebuilt where the layout lands (a Dask worker)
        return {k: v for k, v in self.__dict__.items() if k not in ("_gibbs", "_enumerated")}

    def gibbs(self) -> "_Gibbs":
        """The Gibbs sampler of this layout (built once, then reused by every step)."""
        if getattr(self, "_gibbs", None) is None:
            self._gibbs = _Gibbs(self)
        return self._gibbs

    def stack(self, tables: Sequence[Measurement], what: str = "values") -> np.ndarray:
        return np.concatenate([np.ravel(getattr(t, what)) for t in tables])


@dataclass
class MaxEntModel:
    """Fitted parameters: ``mu`` and ``theta`` (flat, see :class:`MaxEntLayout`) and ``theta0``.

    Examples
    --------
    >>> from ppgm.learners.aggregates import aggregate_records
    >>> d = Domain(("a",), (2,))
    >>> tables = aggregate_records([[0]] * 400 + [[1]] * 400, [1, 0] * 200 + [1, 1, 1, 0] * 100, d, [("a",)])
    >>> m = MaxEntModel.naive_bayes(MaxEntLayout.from_tables(d, tables), tables)
    >>> m.predict_proba(np.array([[0], [1]])).round(2).tolist()   # the cells' positive rates
    [0.5, 0.75]
    """

    layout: MaxEntLayout
    mu: np.ndarray
    theta: np.ndarray
    theta0: float = 0.0

    def decision_function(self, codes: np.ndarray) -> np.ndarray:
        """theta0 + sum_t theta_t[x_t] per record; a code of -1 (unseen category) contributes 0."""
        slots = self.layout.slots_by_table(codes)
        th = np.where(slots >= 0, self.theta[np.maximum(slots, 0)], 0.0)
        return self.theta0 + th.sum(axis=0)

    def predict_proba(self, codes: np.ndarray) -> np.ndarray:
        """P(y = 1 | x) per record."""
        return _sigmoid(self.decision_function(codes))

    def tables(self) -> list[tuple[tuple, np.ndarray, np.ndarray]]:
        """(scope, mu table, theta table) per table, expanded from buckets to cells."""
        dom = self.layout.domain
        return [
            (s, self.mu[sl].reshape(dom.shape(s)), self.theta[sl].reshape(dom.shape(s)))
            for s, sl in zip(self.layout.scopes, self.layout.cell_slots)
        ]

    def joint_log_table(self) -> np.ndarray:
        """Unnormalised log pi(x, y) over every (x, y), axes in domain order then y. Tiny models only."""
        dom = self.layout.domain
        out = np.zeros(dom.shape(dom.variables) + (2,))
        out[..., 1] += self.theta0
        for scope, mu, th in self.tables():
            shape = [1] * len(dom)
            for v in scope:
                shape[dom.index(v)] = dom.cards[dom.index(v)]
            order = np.argsort([dom.index(v) for v in scope])
            mu_b = np.transpose(mu, order).reshape(shape)
            th_b = np.transpose(th, order).reshape(shape)
            out[..., 0] += mu_b
            out[..., 1] += mu_b + th_b
        return out

    @classmethod
    def naive_bayes(cls, layout: MaxEntLayout, tables: Sequence[Measurement], pseudo_count: float = 0.5) -> "MaxEntModel":
        """The closed-form model of the single-feature tables alone: Naive Bayes (pairs start at 0).

        mu_f[k] = log P(x_f = k | y = 0), theta_f[k] = log P(x_f = k | y = 1) - mu_f[k], theta0 the
        prior log-odds; with only single tables this is the exact maximum-entropy fit.
        """
        mu = np.zeros(layout.n_slots)
        theta = np.zeros(layout.n_slots)
        pos_total, totals = [], []
        for t, sl in zip(tables, layout.cell_slots):
            if len(t.variables) != 1:
                continue
            d = np.clip(t.values, 0, None)
            c = np.clip(t.required_label_sums(), 0, d)
            neg = d - c + pseudo_count
            pos = c + pseudo_count
            mu[sl] = np.log(neg / neg.sum())
            theta[sl] = np.log(pos / pos.sum()) - mu[sl]
            pos_total.append(c.sum())
            totals.append(d.sum())
        if pos_total:
            C, N = float(np.mean(pos_total)), float(np.mean(totals))
            theta0 = float(np.log((C + 0.5) / (N - C + 0.5)))
        else:
            theta0 = 0.0
        return cls(layout, mu, theta, theta0)


@dataclass
class ChainShard:
    """A block of persistent chains with its own random generator (and the chains' table slots,
    laid out as :meth:`MaxEntLayout.slots_by_table`)."""

    chains: np.ndarray
    rng: np.random.Generator
    slots: np.ndarray | None = None


@dataclass
class PCDState:
    """The persistent chains (in shards, each with its generator) and the step count: enough to
    resume a run. With one shard, the chains and generator are ``state.chains`` / ``state.rng``."""

    shards: list
    step: int = 0
    coupling: tuple | None = None  # (mu's coupling, its eigenvector) as last measured (``ppgm.learners.maxent_coupling``)
    mu_velocity: np.ndarray | None = None  # mu's last move, for the momentum of its default step on noisy tables

    @property
    def chains(self) -> np.ndarray:
        return np.concatenate([s.chains for s in self.shards])

    @property
    def rng(self) -> np.random.Generator:
        return self.shards[0].rng

    def copy(self) -> "PCDState":
        return PCDState([ChainShard(s.chains.copy(), s.rng, None if s.slots is None else s.slots.copy()) for s in self.shards], self.step,
                        self.coupling, None if self.mu_velocity is None else self.mu_velocity.copy())

    def head(self, k: int, rng: np.random.Generator) -> "PCDState":
        """A new state of this one's first ``k`` chains (copied) in one shard with generator ``rng``
        (a cheaper run that starts where this one is, e.g. the penalty rule's refits)."""
        return PCDState([ChainShard(self.chains[:k].copy(), rng)], 0)


def shard_step(shard: ChainShard, layout: "MaxEntLayout", mu: np.ndarray, theta: np.ndarray, theta0: float) -> tuple:
    """One PCD step of one shard: draw the label, sweep every feature, and return the shard with the
    raw sums the gradient needs: counts, sigmoid-weighted counts, sigmoid-variance weighted counts
    per slot, and the sums of sigma and sigma (1 - sigma). Pure given its inputs (the shard's
    generator advances), so a distributed runner can replay it."""
    gibbs = layout.gibbs()
    slots = layout.slots_by_table(shard.chains) if shard.slots is None else shard.slots
    rng = shard.rng
    y = rng.random(slots.shape[1]) < _sigmoid(theta0 + theta[slots].sum(axis=0))
    gibbs.sweep(shard.chains, y, gibbs.interaction(mu), gibbs.interaction(theta), rng)
    slots = layout.slots_by_table(shard.chains)
    shard.slots = slots
    sig = _sigmoid(theta0 + theta[slots].sum(axis=0))
    flat, S = slots.ravel(), layout.n_slots
    per_cell = np.empty(slots.shape)  # a chain's weight in every table (filled in place: no tiled copies)
    per_cell[:] = sig
    by_sig = np.bincount(flat, weights=per_cell.ravel(), minlength=S)
    per_cell[:] = sig * (1 - sig)
    stats = (
        np.bincount(flat, minlength=S).astype(float),
        by_sig,
        np.bincount(flat, weights=per_cell.ravel(), minlength=S),
        float(sig.sum()),
        float((sig * (1 - sig)).sum()),
        len(sig),
    )
    return shard, stats


def _pcd_step(shard: ChainShard, layout: "MaxEntLayout", mu: np.ndarray, theta: np.ndarray, theta0: float) -> tuple:
    """:func:`shard_step` on a copy of the shard: blocks are values, never changed in place (an
    executor may run a step twice, or keep the previous shard)."""
    # the chains are swept in place, so they are copied; the slots are replaced, never written into
    own = ChainShard(shard.chains.copy(), copy.deepcopy(shard.rng), shard.slots)
    return shard_step(own, layout, mu, theta, theta0)


def _chain_head(shard: ChainShard, k: int) -> np.ndarray:
    """A shard's first ``k`` chain states (exchangeable: a fair sample)."""
    return shard.chains[:k]


def _stack_chains(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate(parts)


def _shard_of(pair: tuple) -> ChainShard:
    return pair[0]


def _stats_of(pair: tuple) -> tuple:
    return pair[1]


@dataclass
class PCDResult:
    """A fitted :class:`MaxEntModel`, the state to resume from, and the training history (one list
    per quantity: ``step``, ``d_error`` and ``c_error`` (mean |expected - target| per table, as a
    fraction of N), ``step_size``, ``gradient_z`` (the pseudo-gradient over its Monte Carlo noise level),
    ``remaining_gain`` ((step, reading) of each convergence test) and whatever the callback returned).

    ``remaining_gain`` is the convergence test: what one more Newton step from the returned model would
    still gain in conditional log-likelihood, in nats per record, from the part of the pseudo-gradient
    that persists from one half of the averaging window to the other (the chains' Monte Carlo noise
    does not; see ``_remaining_gain``). A run that would gain more than ``GAIN_TOL`` raises a
    ``ppgm.ConvergenceWarning``; ``converged`` says which. Measured on Adult (105 tables; in brackets
    the test NLLH, 1 - logloss / H(y), higher is better): 8,000 chains x 300 steps on exact tables
    4.1e-4 (0.4214; the default goes on to 600 steps there), x 100 steps 4.3e-3 (0.4128); read on all
    8,000 chains instead of the first ``GAIN_CHAINS``: 5.7e-4, 5.6e-3, and x 40 steps 0.056 (0.3751); Laplace-noised tables at
    epsilon 1: 300 steps 0.027, 800 0.019, 2,000 0.005 (0.228, 0.259, 0.275: still rising)."""

    model: MaxEntModel
    state: PCDState
    history: dict = field(default_factory=dict)
    remaining_gain: float | None = None
    l2_theta: float | None = None
    selection: dict | None = None

    @property
    def converged(self) -> bool | None:
        """Whether the averaged model is settled: one more Newton step would gain at most ``GAIN_TOL`` nats
        per record (None when there was no window to test: ``average=0`` or fewer than ``MIN_WINDOW``
        steps in it)."""
        return None if self.remaining_gain is None else self.remaining_gain <= GAIN_TOL


class _Sums:
    """Running sums of the parameters over part of the averaging window."""

    def __init__(self, model: "MaxEntModel | None" = None, mu=None, theta=None, theta0: float = 0.0, count: int = 0):
        self.mu = np.zeros_like(model.mu) if model is not None else mu
        self.theta = np.zeros_like(model.theta) if model is not None else theta
        self.theta0, self.count = theta0, count

    def add(self, model: "MaxEntModel") -> None:
        self.mu += model.mu
        self.theta += model.theta
        self.theta0 += model.theta0
        self.count += 1

    @classmethod
    def pooled(cls, parts: Sequence["_Sums"]) -> "_Sums":
        return cls(mu=sum(p.mu for p in parts), theta=sum(p.theta for p in parts), theta0=sum(p.theta0 for p in parts),
                   count=sum(p.count for p in parts))

    def mean(self, layout: "MaxEntLayout") -> "MaxEntModel":
        return MaxEntModel(layout, self.mu / self.count, self.theta / self.count, self.theta0 / self.count)


def _sample_nb_chains(model: MaxEntModel, n_chains: int, rng: np.random.Generator) -> np.ndarray:
    """Initial chains drawn from the Naive Bayes model of the single tables (uniform where a feature
    has no single table)."""
    dom = model.layout.domain
    y = rng.random(n_chains) < _sigmoid(np.array(model.theta0))
    chains = np.empty((n_chains, len(dom)), dtype=np.int64)
    singles = {s[0]: sl for s, sl in zip(model.layout.scopes, model.layout.cell_slots) if len(s) == 1}
    for j, v in enumerate(dom.variables):
        K = dom.cards[j]
        if v in singles:
            sl = singles[v]
            logp = np.where(y[:, None], model.mu[sl] + model.theta[sl], model.mu[sl])
        else:
            logp = np.zeros((n_chains, K))
        chains[:, j] = _categorical(logp.T, rng)
    return chains


def _categorical(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per column of softmax(logits) (categories along axis 0, one column per chain), by
    inverse CDF. The (K, n) layout makes the max, the cumulative sum and the count run across
    chains on contiguous rows (2.3x faster than along the rows of an (n, K) array); the cumulative
    sum adds row to row (numpy's cumsum along axis 0 does not vectorise across the rows)."""
    p = logits - logits.max(axis=0)
    np.exp(p, out=p)
    for k in range(1, p.shape[0]):  # the cumulative sum row by row: 5-20x faster than np.cumsum(axis=0)
        np.add(p[k], p[k - 1], out=p[k])
    u = rng.random(p.shape[1], dtype=p.dtype) * p[-1]
    return np.minimum((p < u).sum(axis=0, dtype=np.int64), p.shape[0] - 1)


class _Gibbs:
    """One Gibbs sweep of every chain: label, then each feature given the others and the label."""

    def __init__(self, layout: MaxEntLayout):
        dom = layout.domain
        self.layout = layout
        self.cards = np.array(dom.cards)
        self.off = np.concatenate([[0], np.cumsum(self.cards)[:-1]]).astype(np.int64)
        self.width = int(self.cards.sum())

    def interaction(self, vec: np.ndarray) -> np.ndarray:
        """W with W[off_g + l, off_f + k] = the log-potential that state l of g adds to state k of f
        (pair tables), and W[off_f + j, off_f + k] = single_f[k] for every j."""
        if not hasattr(self, "_targets"):
            self._index()
        flat = np.bincount(self._targets, weights=vec[self._sources], minlength=self.width * self.width)
        return flat.reshape(self.width, self.width)

    def _index(self) -> None:
        """Where each parameter lands in W (flat target positions and the slots they read), built
        once per layout so that :meth:`interaction` is one ``bincount``."""
        dom, w = self.layout.domain, self.width
        targets, sources = [], []
        for scope, sl in zip(self.layout.scopes, self.layout.cell_slots):
            f = dom.index(scope[0])
            rf = self.off[f] + np.arange(self.cards[f])
            if len(scope) == 1:
                targets.append((rf[:, None] * w + rf[None, :]).ravel())
                sources.append(np.broadcast_to(sl[None, :], (len(rf), len(rf))).ravel())
            else:
                g = dom.index(scope[1])
                rg = self.off[g] + np.arange(self.cards[g])
                cell = sl.reshape(len(rf), len(rg))
                targets += [(rg[None, :] * w + rf[:, None]).ravel(), (rf[:, None] * w + rg[None, :]).ravel()]
                sources += [cell.ravel(), cell.ravel()]
        self._targets = np.concatenate(targets) if targets else np.zeros(0, np.int64)
        self._sources = np.concatenate(sources) if sources else np.zeros(0, np.int64)

    def sweep(self, chains: np.ndarray, y: np.ndarray, Wmu: np.ndarray, Wth: np.ndarray, rng: np.random.Generator) -> None:
        n = len(chains)
        # The chains are visited grouped by label (y = 0 first): a feature's logits are then
        # Wmu' x for one group and (Wmu + Wth)' x for the other, half the products of computing
        # both terms for every chain. The chains go back to their own order at the end (the
        # convergence test reads the first chains as a fair sample).
        order = np.argsort(y, kind="stable")
        n0 = int(n - np.count_nonzero(y))
        states = chains[order]
        # float32 halves the cost of the products; logits are O(10), far from float32's limits.
        # One-hot states are held transposed (width x chains) so each feature's logits come out as
        # (K, chains), the layout _categorical reduces fastest.
        onehot = np.zeros((self.width, n), dtype=np.float32)
        cols = np.arange(n)
        onehot[self.off[None, :] + states, cols[:, None]] = 1.0
        W0 = np.ascontiguousarray(Wmu.T, dtype=np.float32)
        W1 = np.ascontiguousarray((Wmu + Wth).T, dtype=np.float32)
        logits = np.empty((int(self.cards.max()), n), dtype=np.float32)
        for f in range(len(self.cards)):
            K, o = int(self.cards[f]), int(self.off[f])
            L = logits[:K]
            L[:, :n0] = W0[o : o + K] @ onehot[:, :n0]
            L[:, n0:] = W1[o : o + K] @ onehot[:, n0:]
            new = _categorical(L, rng)
            onehot[o : o + K] = 0.0
            onehot[o + new, cols] = 1.0
            states[:, f] = new
        chains[order] = states


def fit_maxent(
    tables: Sequence[Measurement],
    domain: Domain,
    n: float | None = None,
    n_chains: int | None = None,
    max_iter: int | None = None,
    l2_mu: float = 1.0,
    l2_theta: float | str | None = None,
    step_mu: float | None = None,
    step_theta: float | None = None,
    rescaled: bool = True,
    precondition: bool = True,
    max_step: float = 1.0,
    average: float = 0.3,
    seed=None,
    progress: bool = True,
    model: MaxEntModel | None = None,
    state: PCDState | None = None,
    n_shards: int = 1,
    executor: Executor | None = None,
    callback: Callable[[MaxEntModel, int], dict] | None = None,
    callback_every: int = 10,
    prior_chains: int | None = None,
    method: str = "auto",
    tol: float | str | None = "auto",
) -> PCDResult:
    """Fit the maximum-entropy model to aggregated tables by persistent contrastive divergence.

    Exact tables over a small feature space (at most ``ENUMERATE_CELLS`` joint configurations) are
    fitted exactly instead, by Newton's method over every configuration (``method``).

    Parameters
    ----------
    tables : sequence of Measurement
        Aggregated tables (``values`` = counts d, ``label_sums`` = c) over single features and pairs,
        exact or noisy (Laplace / Gaussian), possibly hashed.
    domain : Domain
        The features (not the label).
    n : float, optional
        Number of records; default the tables' ``n``, else the mean of the single tables' totals.
    n_chains : int, optional
        Persistent Gibbs chains (the paper: about 10% of N, 10k on Adult); at most 10^7. Default 8,000 on
        exact tables, 4,000 on noisy ones (see ``max_iter``).
    max_iter : int, optional
        The most gradient steps (one Gibbs sweep each). Default 1,800 on exact tables, where the run stops at the
        first convergence test that reads at most ``tol`` (``tol``); 8,000 chains x 300 steps were chosen on a 20%
        validation split of Adult's train rows (seeds 7 and 8, never the test split): within 0.0004 of the
        validation NLLH of 10,000 x 500 at half its time (see ``benchmarks/RESULTS.md``). On noisy tables the
        same budget runs as 4,000 chains x 600 steps, all of them (the noisy cells' prior keeping 8,000 chains'
        Monte Carlo variance, ``prior_chains``): mu travels far towards noisy tables and per-step progress limits
        it, not the chains' precision (tuning releases of Adult at epsilon 1: +0.006 to +0.014 validation NLLH at
        the same time, within 0.004 of 1,000-step runs; ``docs/explain/maxent.md``, "Half the chains, twice the
        steps"). The noisy cells' steps are Fisher-scaled (the curvature times the observation's share of the
        Gaussian approximation); with the penalty chosen from the tables the pilot runs a third of the first
        test's steps (``PILOT_SHARE``) and the final fit (which continues its chains) the rest.
    tol : float, "auto" or None
        Stop once one more Newton step from the averaged model would gain at most this many nats of conditional
        log-likelihood per record (the convergence test, read every ``CHECK_STEPS`` = 300 steps on the last
        ``average`` of the steps so far); None runs all ``max_iter`` steps. "auto": ``SETTLE_TOL`` = 2.5e-4 on
        exact tables, None on noisy ones. Some exact fits still move after 300 steps, while the test reads below
        ``GAIN_TOL``: ALARM's panel label reads 9e-4 there and ends 0.010 short of the quadratic logistic, 0.0084
        after 600 steps and 0.0075 after 1,200, where its exact fit is 0.0072 short (``docs/explain/maxent.md``,
        "When PCD stops").
    l2_mu : float
        L2 penalty on mu, in units of records (the loss is a sum over N records); light, as the
        paper advises.
    l2_theta : float, "release" or None
        L2 penalty on theta, in records. Default (None, "release"): chosen from the tables by a parametric
        bootstrap (``ppgm.learners.maxent_rule``: a pilot at 30, tables simulated from it with the same record
        count and noise, refits at candidate penalties; the result's ``l2_theta`` and ``selection`` say what
        was chosen and why). Once PCD converges the penalty is the regulariser, and how much a data set
        needs varies: on pgmpy's bundled networks the quadratic logistic's validated penalty ran from 1
        (a rare label) to 64 (a weak one), and a fixed 30 left a rare label's fit 0.02 NLLH short.
        A number fixes it (with rows at hand, ``GridSearchCV`` on ``MaxEntClassifier`` tunes it).
    step_mu, step_theta : float, optional
        Step sizes. theta: default ``DEFAULT_STEP / (T + 1)`` = 1.5 / (T + 1) for T tables: every record
        sits in one cell of each table and the label's base rate is moved by all T theta tables and the
        intercept, so T + 1 preconditioned steps of 1 / (T + 1) add up to about one Newton step (the
        paper's 1 / T); 1.5 over-relaxes a little (on Adult, T = 105, 2 / T also converged, 4 / T
        diverged). mu: default ``DEFAULT_STEP / (lambda + 1)``, lambda the tables' coupling measured on the
        chains every 25 steps (``ppgm.learners.maxent_coupling``; at most T, 29-45 on Adult): the covariance of
        the cells is centred, so tables over weakly dependent features do not add up. On noisy tables,
        where mu travels far, this settles 2-3x sooner (``docs/explain/maxent.md``, "mu's step from the tables'
        coupling"); the history's ``mu_coupling`` lists the measures. On noisy tables the default mu step
        also carries heavy-ball momentum ``MU_MOMENTUM * (1 - w)`` per cell, w the cell's share of its
        observation (none on exact cells, none in the averaging window): mu travels far towards noisy tables
        (with the pilot's third of ``max_iter``, +0.003 to +0.015 validation NLLH on Adult at epsilon 1 at 300
        steps; ``docs/explain/maxent.md``, "Momentum on the noise-dominated cells"). A number fixes either step
        (and drops the momentum).
    rescaled : bool
        Use the rescaled pseudo-gradient (d / d_hat) c_hat - c for theta (Eq. 6).
    precondition : bool
        Divide each coordinate by its approximate Hessian diagonal (d_hat for mu; for theta the
        sigmoid-variance weighted counts times d / d_hat, or c_hat without rescaling); else by N.
    max_step : float
        Largest change of any parameter in one step (guards cells that the chains rarely visit).
    average : float
        Return the average of the parameters over this final fraction of the steps (Polyak-Ruppert:
        the iterates keep the chains' Monte Carlo noise, their average does not); 0: the last iterate.
    seed : int or numpy.random.Generator, optional
    progress : bool
        Show a progress bar (drawn only in a terminal or a notebook; see ``ppgm.core.progress``).
    model, state : optional
        Warm start: continue from a fitted model and its chains (and generators).
    n_shards : int
        Split the chains into shards with their own generators (spawned from ``seed``). The result
        depends on the sharding, not on where the shards run.
    executor : Executor, optional
        Where the shards live (``ppgm.core.executor``): in this process (default), or on Dask workers
        with ``ppgm.adapters.dask_executor(client)``. Same shards, same result.
    callback : callable, optional
        ``callback(model, step) -> dict`` every ``callback_every`` steps; its values are appended
        to the history (e.g. a validation NLLH).
    prior_chains : int, optional
        Noisy tables: the chain count whose Monte Carlo variance the noisy cells' prior includes
        (default: 8,000 with the default chains, else the chains of this run). That variance sets how far
        the targets follow the noisy counts, so it shapes the fitted model; the penalty rule's refits, with
        fewer chains, pass the final fit's count so that they fit the same estimator (with their own,
        they chose penalties half a decade too large: ``docs/explain/maxent.md``, "The penalty chosen from the
        tables").
    method : {"auto", "pcd", "exact"}
        "auto": exact tables whose features have at most ``ENUMERATE_CELLS`` joint configurations are fitted
        exactly (``ppgm.learners.maxent_exact``: Newton's method on the likelihood summed over every
        configuration, to a Newton decrement of 1e-6 nats per record, at most 200 steps; the callback runs after
        each), all else by PCD. There the Gibbs sweep mixes slowly when the label is nearly a function of the features, and
        the exact fit reached the quadratic logistic where PCD stopped 0.019 short (ASIA, ``benchmarks/panel.py``).
        The chains of the returned state are then independent draws from the fitted model; ``max_iter`` and the
        step, averaging and executor settings only matter to PCD. "pcd" forces PCD; "exact" requires the exact fit.

    Returns
    -------
    PCDResult

    Examples
    --------
    >>> from ppgm.learners.aggregates import aggregate_records
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 2, size=(4000, 2)); y = (rng.random(4000) < 0.2 + 0.6 * x[:, 0]).astype(int)
    >>> d = Domain(("a", "b"), (2, 2))
    >>> tables = aggregate_records(x, y, d, [("a",), ("b",), ("a", "b")])
    >>> fit = fit_maxent(tables, d, n_chains=2000, max_iter=100, seed=0, progress=False)
    >>> np.round(fit.model.predict_proba(np.array([[0, 0], [1, 0]])), 1).tolist()
    [0.2, 0.8]
    """
    checks.flag(rescaled, "rescaled")
    checks.flag(precondition, "precondition")
    checks.flag(progress, "progress")
    checks.callback(callback)
    if method not in ("auto", "pcd", "exact"):
        raise ValueError(f"method: expected 'auto', 'pcd' or 'exact', got {method!r}")
    tables = _check_tables(tables)
    noisy = any(t.noise != "none" for t in tables)
    if n_chains is None:
        n_chains = NOISY_CHAINS if noisy else EXACT_CHAINS
        if noisy and prior_chains is None:
            prior_chains = EXACT_CHAINS  # the estimator tuned at the exact tables' chain count (else: the run's own)
    if max_iter is None:
        max_iter = NOISY_STEPS if noisy else EXACT_MAX_STEPS
    if isinstance(tol, str) and tol == "auto":
        tol = None if noisy else SETTLE_TOL
    elif tol is not None:
        tol = checks.non_negative(tol, "tol")
    l2_rule = l2_theta is None or (isinstance(l2_theta, str) and l2_theta == "release")
    if isinstance(l2_theta, str) and not l2_rule:
        raise TypeError(f"l2_theta: expected a number >= 0, 'release' or None, got {l2_theta!r}")
    _check_fit_arguments(n_chains, max_iter, l2_mu, maxent_rule.PILOT_L2 if l2_rule else l2_theta, average, step_mu, step_theta, max_step,
                         n_shards, callback_every)
    if prior_chains is not None:
        checks.count(prior_chains, "prior_chains", maximum=MAX_CHAINS)
    if l2_rule:
        return _fit_release(tables, domain, n, n_chains, max_iter, seed, model, state, n_shards, executor, callback,
                            dict(l2_mu=l2_mu, step_mu=step_mu, step_theta=step_theta, rescaled=rescaled,
                                 precondition=precondition, max_step=max_step, average=average, prior_chains=prior_chains,
                                 method=method, tol=tol),
                            dict(progress=progress, callback_every=callback_every))
    l2_theta = checks.non_negative(l2_theta, "l2_theta")
    return _fit_fixed(tables, domain, n, n_chains, max_iter, l2_mu=l2_mu, l2_theta=l2_theta, step_mu=step_mu,
                      step_theta=step_theta, rescaled=rescaled, precondition=precondition, max_step=max_step, average=average,
                      seed=seed, progress=progress, model=model, state=state, n_shards=n_shards, executor=executor,
                      callback=callback, callback_every=callback_every, prior_chains=prior_chains, method=method, tol=tol)


def _check_points(max_iter: int, tol: float | None, average: float, offset: int) -> list[tuple[int, int, int]]:
    """The convergence tests of a PCD run of ``max_iter`` steps after ``offset`` earlier ones (the penalty rule's
    pilot): ``(start, middle, end)`` of each averaging window, in the run's own steps. With a ``tol``, one test every
    ``CHECK_STEPS`` steps of the whole fit and one at the end; without, one at the end. Each window is the last
    ``average`` of the fit's steps so far (at most 90% of the run's)."""
    ends = [int(max_iter)]
    if tol is not None and average > 0:
        ends = sorted({c - offset for c in range(CHECK_STEPS, offset + int(max_iter), CHECK_STEPS) if c > offset} | {int(max_iter)})
    points = []
    for k in ends:
        length = average * k if offset == 0 else min(average * (offset + k), 0.9 * k)
        start = k - int(round(length))
        points.append((start, (start + k) // 2, k))
    return points


def _fit_fixed(tables, domain, n, n_chains, max_iter, *, l2_mu, l2_theta, step_mu, step_theta, rescaled, precondition,
               max_step, average, seed, progress, model, state, n_shards, executor, callback, callback_every, prior_chains,
               method, tol, offset: int = 0) -> PCDResult:
    """fit_maxent at a fixed theta penalty, its arguments checked; ``offset`` steps were taken before (the penalty
    rule's pilot), which the averaging windows count."""
    layout = model.layout if model is not None else MaxEntLayout.from_tables(domain, tables)
    T = len(tables)
    obs = _Observed.of(layout, tables, n)
    if model is None:
        model = MaxEntModel.naive_bayes(layout, tables)
    else:
        model = MaxEntModel(layout, model.mu.copy(), model.theta.copy(), model.theta0)
    state = _initial_state(model, n_chains, n_shards, seed) if state is None else state.copy()
    if method != "pcd" and not obs.noisy and layout.enumerated() is not None:
        return _fit_exact(model, state, obs, l2_mu, l2_theta, callback)
    if method == "exact":
        raise ValueError("method='exact' needs exact (noise-free) tables over features with at most "
                         f"{ENUMERATE_CELLS:,} joint configurations")
    pool = (executor or InProcess()).scatter(state.shards, "PCD chain shards")
    update = _Update(obs, DEFAULT_STEP / (T + 1) if step_mu is None else float(step_mu),
                     DEFAULT_STEP / (T + 1) if step_theta is None else float(step_theta),
                     l2_mu, l2_theta, rescaled, precondition, max_step, obs.n / sum(len(sh.chains) for sh in state.shards),
                     prior_scale=None if prior_chains is None else obs.n / int(prior_chains),
                     velocity=state.mu_velocity)
    history: dict = {"step": [], "d_error": [], "c_error": [], "step_size": [], "gradient_z": []}
    per_shard = -(-COUPLING_CHAINS // len(state.shards))
    points = _check_points(max_iter, tol, average, offset)
    # the parameters and pseudo-gradients are summed per segment between the windows' bounds, so each test pools
    # exactly its window's steps
    bounds = sorted({b for point in points for b in point})
    start_avg = points[0][0]
    sums: dict = {}  # segment -> (parameter sums, pseudo-gradient sums)
    averaged, gain = None, None
    checked = iter(points)
    point = next(checked)
    for it in progress_bar(range(int(max_iter)), desc="PCD", enabled=progress):
        if step_mu is None:
            # mu's step from the tables' measured coupling, re-measured every COUPLING_EVERY steps of the state
            # (a resumed run keeps the schedule and the last measure, so it continues exactly)
            if state.coupling is None or state.step % COUPLING_EVERY == 0:
                sample = pool.reduce(_chain_head, k=per_shard, combine=_stack_chains)
                state.coupling = mu_coupling(layout.slots_by_table(sample), layout.n_slots,
                                             None if state.coupling is None else state.coupling[1])
                history.setdefault("mu_coupling", []).append((state.step, state.coupling[0]))
            update.step_mu, update.mu_share = DEFAULT_STEP / (state.coupling[0] + 1), state.coupling[0] + 1
        # momentum while mu travels, plain steps in the averaging window (momentum amplifies the chains' noise
        # in the iterates that are averaged; with average = 0, start_avg = max_iter and it is on throughout)
        update.momentum = MU_MOMENTUM if step_mu is None and it < start_avg else 0.0
        pairs = pool.map(_pcd_step, layout=layout, mu=model.mu, theta=model.theta, theta0=float(model.theta0)).persist()
        record = update.apply(model, pairs.reduce(_stats_of))
        pool = pairs.map(_shard_of).persist()
        state.step += 1
        if it >= start_avg and average > 0:
            segment = sums.setdefault(int(np.searchsorted(bounds, it, side="right")), (_Sums(model), _Sums(model)))
            segment[0].add(model)
            if update.gradient is not None:  # set by every apply
                segment[1].add(update.gradient)
        history["step"].append(state.step)
        for key, val in record.items():
            history[key].append(val)
        if callback is not None and state.step % callback_every == 0:
            for key, val in (callback(model, state.step) or {}).items():
                history.setdefault(key, []).append((state.step, val))
        if it + 1 == point[2]:
            averaged, gain = _window_test(layout, sums, bounds, point, pool, update, l2_theta)
            if gain is not None:
                history.setdefault("remaining_gain", []).append((state.step, gain))
            if point[2] == int(max_iter) or (gain is not None and tol is not None and gain <= tol):
                break
            point = next(checked)
    state.shards = pool.collect()
    state.mu_velocity = update.velocity
    if averaged is not None:
        model = averaged
        if gain is not None:
            if gain > GAIN_TOL:
                warnings.warn(f"PCD did not converge: one Newton step from the averaged model would still gain {gain:.2g} "
                              f"nats of conditional log-likelihood per record (more than {GAIN_TOL:g}); raise max_iter "
                              "(noisy tables need thousands of steps) or continue from this result (model=, state=)",
                              ConvergenceWarning, stacklevel=3)
    return PCDResult(model, state, history, gain, l2_theta)


def _window_test(layout: "MaxEntLayout", sums: dict, bounds: list, point: tuple, pool, update: "_Update",
                 l2_theta: float) -> tuple:
    """The averaged model over one window ``point`` = (start, middle, end) and its convergence test (None with
    fewer than ``MIN_WINDOW`` steps): the remaining gain from the two halves' mean pseudo-gradients, read on the
    first ``GAIN_CHAINS`` chains (exchangeable: a fair sample that keeps the test cheap)."""
    start, middle, end = (bounds.index(b) + 1 for b in point)
    params = [sums[k][0] for k in range(start, end) if k in sums]
    if not params:
        return None, None
    averaged = _Sums.pooled(params)
    model = averaged.mean(layout)
    if averaged.count < MIN_WINDOW:
        return model, None
    halves = [_Sums.pooled([sums[k][1] for k in range(a, b) if k in sums]).mean(layout) for a, b in ((start, middle), (middle, end))]
    chains = pool.reduce(_chain_head, k=GAIN_CHAINS, combine=_stack_chains)[:GAIN_CHAINS]
    return model, _remaining_gain(model, halves, chains, update.obs.n / len(chains), l2_theta, share=update.share)


def _fit_exact(model: MaxEntModel, state: PCDState, obs: "_Observed", l2_mu: float, l2_theta: float, callback) -> PCDResult:
    """fit_maxent on an enumerable feature space (``maxent_exact``); the state's chains are redrawn from the
    fitted model with each shard's generator, so the penalty rule and warm starts read them as PCD's."""
    layout = model.layout
    table = layout.enumerated()
    assert table is not None  # the caller checked
    configs, A = table
    history: dict = {"step": []}

    def on_step(mu, theta, theta0, k):
        history["step"].append(state.step + k)
        if callback is not None:  # after every Newton step (a fit takes tens)
            for key, val in (callback(MaxEntModel(layout, mu, theta, theta0), state.step + k) or {}).items():
                history.setdefault(key, []).append((state.step + k, val))

    fit = maxent_exact.fit_enumerated(A, layout.offsets, layout.sizes, obs.d, obs.c, obs.C, obs.n, model.mu, model.theta,
                                      float(model.theta0), l2_mu, l2_theta, on_step=on_step)
    history.update(fit.history)
    model = MaxEntModel(layout, fit.mu, fit.theta, fit.theta0)
    for shard in state.shards:
        shard.chains = maxent_exact.draw(A, configs, fit.mu, fit.theta, fit.theta0, len(shard.chains), shard.rng)
        shard.slots = None
    state.step += len(fit.history["decrement"])
    chains = state.chains[:GAIN_CHAINS]
    # the exact gradient at the result, read by the same conditional Newton test as PCD's
    grad = MaxEntModel(layout, np.zeros_like(fit.mu), fit.gradient_theta, fit.gradient_theta0)
    gain = _remaining_gain(model, [grad, grad], chains, obs.n / len(chains), l2_theta)
    if not fit.converged or gain > GAIN_TOL:
        warnings.warn(f"the exact fit did not converge in {len(fit.history['decrement'])} Newton steps (decrement "
                      f"{fit.decrement:.2g} nats per record): the tables may be inconsistent, or a penalty of 0 leaves "
                      "the optimum at infinity; set l2_theta / l2_mu, or method='pcd'", ConvergenceWarning, stacklevel=4)
        gain = max(gain, GAIN_TOL * 2)
    return PCDResult(model, state, history, gain, l2_theta)


#: With the penalty chosen from the tables, the pilot runs max_iter // PILOT_SHARE steps and the final fit the rest
#: (docs/explain/maxent.md, "The penalty chosen from the tables").
PILOT_SHARE = 3


def _pilot_steps(max_iter: int) -> int:
    return max(int(max_iter) // PILOT_SHARE, 1)


def _fit_release(tables, domain, n, n_chains, max_iter, seed, model, state, n_shards, executor, callback, settings, show):
    """fit_maxent with the theta penalty chosen from the tables (``ppgm.learners.maxent_rule``): the pilot at
    ``maxent_rule.PILOT_L2``, the bootstrap choice (candidates down to ``LOWER`` on noisy tables, ``LOWER_EXACT``
    on exact ones), then the pilot's chains continued at the chosen penalty. One history: the pilot's steps, then
    the final fit's."""
    rng = as_generator(seed)
    settings = dict(settings)
    prior = settings.pop("prior_chains")
    # the pilot takes a share of the first test's steps (with a tol, the fit may stop there)
    pilot_steps = _pilot_steps(max_iter if settings["tol"] is None else min(int(max_iter), CHECK_STEPS))
    fit = functools.partial(fit_maxent, domain=domain, n=n, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the pilot is a starting point, tested below
        pilot = fit(tables, l2_theta=maxent_rule.PILOT_L2, n_chains=n_chains, max_iter=pilot_steps, seed=rng,
                    model=model, state=state, n_shards=n_shards, executor=executor, callback=callback, prior_chains=prior,
                    **show)
    # the refits and the final fit fit the pilot's estimator: the same prior variance, though with fewer chains
    fit = functools.partial(fit, prior_chains=prior or len(pilot.state.chains))
    refit = functools.partial(fit, progress=False)
    noisy = any(t.noise != "none" for t in tables)
    choice = maxent_rule.release_l2_theta(tables, pilot, _record_count(tables, n), refit, seed=rng,
                                          lower=maxent_rule.LOWER if noisy else maxent_rule.LOWER_EXACT)
    steps = max(int(max_iter) - pilot_steps, 1)
    # the averaging windows stay the last ``average`` of all steps so far (pilot included), all in the final fit
    final = _fit_fixed(tables, domain, n, n_chains, steps, **{**settings, "prior_chains": prior or len(pilot.state.chains)},
                       **show, l2_theta=choice.value, seed=None, model=pilot.model, state=pilot.state, n_shards=n_shards,
                       executor=executor, callback=callback, offset=pilot_steps)
    history = {k: list(v) for k, v in pilot.history.items()}
    for k, v in final.history.items():
        history.setdefault(k, []).extend(v)
    history["selection"] = [choice.as_record()]
    return PCDResult(final.model, final.state, history, final.remaining_gain, choice.value, choice.as_record())


def _check_tables(tables) -> list:
    if isinstance(tables, (str, bytes)) or not isinstance(tables, (list, tuple)):
        raise TypeError(f"tables: expected a list of aggregated Measurements, got {type(tables).__name__}")
    tables = list(tables)
    if not tables:
        raise ValueError("tables: expected at least one aggregated table")
    for k, t in enumerate(tables):
        if not isinstance(t, Measurement):
            raise TypeError(f"tables[{k}]: expected a ppgm Measurement, got {type(t).__name__}")
        if t.label_sums is None:
            raise ValueError(f"tables[{k}]: expected label sums (aggregated counts d and label sums c)")
    return tables


def _check_fit_arguments(n_chains, max_iter, l2_mu, l2_theta, average, step_mu, step_theta, max_step, n_shards,
                         callback_every) -> None:
    checks.count(n_chains, "n_chains", maximum=MAX_CHAINS)
    checks.count(max_iter, "max_iter")
    checks.count(callback_every, "callback_every")
    if checks.count(n_shards, "n_shards") > n_chains:
        raise ValueError(f"n_shards: expected 1 .. n_chains ({n_chains}), got {n_shards!r}")
    checks.non_negative(l2_mu, "l2_mu")
    checks.non_negative(l2_theta, "l2_theta")
    checks.positive(max_step, "max_step", allow_inf=True)
    for name, step in (("step_mu", step_mu), ("step_theta", step_theta)):
        if step is not None:
            checks.positive(step, name)
    checks.in_range(average, "average", 0.0, 1.0)
    if average == 1.0:
        raise ValueError("average: expected a fraction in [0, 1), got 1.0")


def _initial_state(model: MaxEntModel, n_chains: int, n_shards: int, seed) -> PCDState:
    """Chains drawn from the Naive Bayes start, in ``n_shards`` shards with generators spawned from ``seed``."""
    if int(n_shards) < 1 or int(n_shards) > int(n_chains):
        raise ValueError(f"n_shards: expected 1 .. n_chains, got {n_shards!r}")
    base = as_generator(seed)
    rngs = [base] if int(n_shards) == 1 else base.spawn(int(n_shards))
    sizes = np.diff(np.linspace(0, int(n_chains), int(n_shards) + 1).round().astype(int))
    return PCDState([ChainShard(_sample_nb_chains(model, int(k), r), r) for k, r in zip(sizes, rngs)], 0)


@dataclass
class _Observed:
    """The aggregated targets in the layout's flat order: counts d, label sums c, N, and the label
    total C (from the single tables)."""

    tables: list
    d: np.ndarray
    c: np.ndarray
    n: float
    C: float
    groups: list  # the noisy tables' slots, by noise law (empty for exact tables)

    @property
    def noisy(self) -> bool:
        return bool(self.groups)

    @classmethod
    def of(cls, layout: MaxEntLayout, tables: list, n: float | None) -> "_Observed":
        T = len(tables)
        n = _record_count(tables, n)
        d_obs, c_obs = layout.stack(tables, "values"), layout.stack(tables, "label_sums")
        pieces = np.cumsum([0] + [t.values.size for t in tables])
        single_rows = np.concatenate([np.arange(pieces[i], pieces[i + 1]) for i, t in enumerate(tables) if len(t.variables) == 1] or [np.zeros(0, np.int64)])
        n_single = sum(1 for t in tables if len(t.variables) == 1)
        C_obs = float(c_obs[single_rows].sum() / n_single) if n_single else float(c_obs.sum() / T)
        return cls(tables, d_obs, c_obs, n, C_obs, _noise_groups(tables, pieces))


def _record_count(tables: list, n: float | None) -> float:
    """N: given, else the tables' released count, else the mean total of the single-feature tables."""
    if n is None:
        known = [t.n for t in tables if t.n is not None]
        singles = [t.values.sum() for t in tables if len(t.variables) == 1] or [t.values.sum() for t in tables]
        n = float(known[0]) if known else float(np.mean(singles))
    if not n > 0:
        raise ValueError(f"n: expected a positive record count, got {n!r}")
    return n


@dataclass
class _Update:
    """One preconditioned pseudo-gradient step of the parameters from the chains' sums."""

    obs: _Observed
    step_mu: float
    step_theta: float
    l2_mu: float
    l2_theta: float
    rescaled: bool
    precondition: bool
    max_step: float
    scale: float
    prior_scale: float | None = None  # records per chain in the noisy cells' prior variance (default ``scale``)
    gradient: "MaxEntModel | None" = None  # the last step's pseudo-gradient (for the convergence test)
    share: "np.ndarray | float" = 1.0  # the last step's share w of each theta cell's observation (noisy tables)
    mu_share: float | None = None  # what the mu step shares the data's curvature among (default T + 1; the coupling + 1)
    momentum: float = 0.0  # heavy-ball momentum of mu on noisy cells, times 1 - w (``MU_MOMENTUM`` for the default step)
    velocity: "np.ndarray | None" = None  # mu's last move (carried in ``PCDState.mu_velocity``)

    def apply(self, model: MaxEntModel, stats: tuple) -> dict:
        """Move ``model`` in place; return the step's ``d_error``, ``c_error``, ``step_size`` and ``gradient_z``
        (the pseudo-gradient's L1 norm over what the chains' Monte Carlo noise alone would give: about 1 at a
        stationary point, more while PCD still moves)."""
        obs, scale, n, T = self.obs, self.scale, self.obs.n, len(self.obs.tables)
        d_raw, c_raw, h_raw, sig_sum, sig_var, count = stats
        d_hat, c_hat, h_hat = d_raw * scale, c_raw * scale, h_raw * scale
        if obs.noisy:
            d_t, c_t, w_d, w_c = _targets(obs.groups, obs.d, obs.c, d_hat, c_hat, self.prior_scale or scale)
        else:
            d_t, c_t, w_d, w_c = obs.d, obs.c, 1.0, 1.0
        # gradients of the negative log-likelihood (+ L2)
        g_mu = d_hat - d_t + 2 * self.l2_mu * model.mu
        if self.rescaled:
            ratio = (d_t + scale) / (d_hat + scale)
            g_th = ratio * c_hat - c_t + 2 * self.l2_theta * model.theta
            h_th = ratio * h_hat
        else:
            g_th = c_hat - c_t + 2 * self.l2_theta * model.theta
            h_th = c_hat  # the joint model's curvature: theta_k also moves records into cell k
        if self.precondition:
            # A noisy cell's curvature is the exact one times its share w of the observation (Fisher scoring
            # of the Gaussian approximation; without it a step is w times too short). On noisy tables the
            # penalty's is divided like the data's (theta: by T + 1, mu: by its measured coupling + 1): the
            # step shares the data's curvature among the tables each record sits in, not the penalty, and the
            # large penalties a release calls for settle 5x sooner. On exact tables the full penalty stays in:
            # cells whose label rate is near 0 or 1 are held by the penalty alone, and without its damping the
            # rescaled pseudo-gradient of those cells sends PCD off on networks with near-deterministic tables
            # (docs/explain/maxent.md, "Why the penalty's curvature is divided among the tables only on noisy
            # tables").
            mu_share, th_share = (self.mu_share or T + 1, T + 1) if obs.noisy else (1.0, 1.0)
            dir_mu = g_mu / (w_d * np.maximum(d_hat, scale) + 2 * self.l2_mu / mu_share)
            dir_th = g_th / (w_c * np.maximum(h_th, scale) + 2 * self.l2_theta / th_share)
        else:
            dir_mu, dir_th = g_mu / n, g_th / n
        before = model.mu.copy() if obs.noisy and self.momentum > 0 else None
        model.mu -= np.clip(self.step_mu * dir_mu, -self.max_step, self.max_step)
        if before is not None:  # heavy ball on the cells the noise dominates; exact cells (w = 1) get none
            if self.velocity is not None:
                model.mu += np.clip(self.momentum * (1 - w_d) * self.velocity, -self.max_step, self.max_step)
            self.velocity = model.mu - before
        else:
            self.velocity = None
        model.theta -= np.clip(self.step_theta * dir_th, -self.max_step, self.max_step)
        C_t = obs.C if not obs.noisy else float(np.clip(obs.C, 0.5, n - 0.5))
        g0 = n * sig_sum / count - C_t
        self.gradient = MaxEntModel(model.layout, g_mu, g_th, float(g0))
        self.share = w_c
        model.theta0 -= float(np.clip(self.step_theta * g0 / max(n * sig_var / count, 1.0), -self.max_step, self.max_step))
        noise = np.sqrt(2 / np.pi) * (np.sqrt(np.maximum(d_hat, scale) * scale).sum() + np.sqrt(np.maximum(h_th, scale) * scale).sum())
        return {"d_error": float(np.abs(d_hat - d_t).sum() / (n * T)), "c_error": float(np.abs(c_hat - c_t).sum() / (n * T)),
                "step_size": float(np.abs(self.step_theta * dir_th).max()),
                "gradient_z": float((np.abs(g_mu).sum() + np.abs(g_th).sum()) / noise)}


def _remaining_gain(model: MaxEntModel, grads: Sequence[MaxEntModel], chains: np.ndarray, scale: float, l2_theta: float,
                    iters: int = 25, share: "np.ndarray | float" = 1.0) -> float:
    """What one more Newton step of the conditional log-likelihood would still gain from ``model``, in
    nats per record: the Newton decrement g^T H^-1 g / (2 N), with g taken from the two halves of the
    averaging window, ``mean(p (1 - p) f_a f_b) / 2`` over the chains' states, where ``f_h = x . delta_h``
    and ``delta_h`` solves H delta = g_h for half h's mean pseudo-gradient of theta and theta0. The
    halves' Monte Carlo noise is nearly independent, so it mostly cancels from the product while a
    systematic gradient (PCD still on its way) stays. H is the Gauss-Newton Hessian
    sum_x p(1 - p) x x^T over the chains (times N / chains, plus the L2 term and a small ridge), solved
    by conjugate gradients. Independent of the step size.

    On noisy tables a theta cell's curvature is the exact one times ``share``, its share w of the
    observation (``_targets``; the steps are preconditioned by the same w): the Hessian is
    D^(1/2) H D^(1/2) with D = diag(w), so the gradients enter as g / sqrt(w). Without it the test
    under-reads the remaining gain by about w (0.01-0.05 on Adult at epsilon 1)."""
    slots = model.layout.slots_by_table(chains)
    T, n_slots = slots.shape[0], model.theta.size
    flat = np.where(slots >= 0, slots, n_slots).ravel()  # unseen codes go to a dummy slot
    p = model.predict_proba(chains)
    w = p * (1 - p) * scale
    curv = np.bincount(flat, weights=np.tile(w, T), minlength=n_slots + 1)[:n_slots]
    # a small ridge (1e-3 of the mean curvature) keeps the step finite along directions that the chains
    # do not pin down (unvisited cells, the tables' shared totals when l2 is 0)
    ridge = 2 * l2_theta + 1e-3 * max(float(curv[curv > 0].mean()) if (curv > 0).any() else 1.0, 1e-12)

    def features(v: np.ndarray) -> np.ndarray:  # x . (theta, theta0) per chain
        return np.append(v[:-1], 0.0)[flat].reshape(T, -1).sum(axis=0) + v[-1]

    def hess(v: np.ndarray) -> np.ndarray:
        u = w * features(v)
        out = np.bincount(flat, weights=np.tile(u, T), minlength=n_slots + 1)[:n_slots]
        return np.append(out + ridge * v[:-1], u.sum() + 1e-3 * float(w.sum()) * v[-1])

    root_share = np.sqrt(np.clip(np.broadcast_to(np.asarray(share, dtype=float), (n_slots,)), 1e-12, 1.0))

    def newton(grad: MaxEntModel) -> np.ndarray:
        # cells no chain visits move no log-odds
        g = np.append(np.where(curv > 0, grad.theta / root_share, 0.0), grad.theta0)
        x, r = np.zeros_like(g), g.copy()
        d, rr = r.copy(), float(r @ r)
        for _ in range(iters):  # conjugate gradients; H is positive definite
            if rr <= 1e-12 * float(g @ g) or rr == 0:
                break
            hd = hess(d)
            alpha = rr / float(d @ hd)
            x += alpha * d
            r -= alpha * hd
            rr_new = float(r @ r)
            d = r + (rr_new / rr) * d
            rr = rr_new
        return features(x)

    f_a, f_b = (newton(g) for g in grads)
    return max(0.5 * float(np.mean(p * (1 - p) * f_a * f_b)), 0.0)


def _noise_groups(tables, pieces) -> list:
    """The noisy tables grouped by noise law (kind, scale, integer): ``(a table of the group, its slots)``,
    so that each step's posterior means are one vectorised call per group (a release has one or two),
    not two per table."""
    groups: dict = {}
    for i, t in enumerate(tables):
        if t.noise != "none":
            groups.setdefault((t.noise, float(t.scale), bool(t.integer)), (t, []))[1].append(np.arange(pieces[i], pieces[i + 1]))
    return [(t, np.concatenate(rows)) for t, rows in groups.values()]


def _targets(groups, d_obs, c_obs, d_hat, c_hat, scale) -> tuple:
    """Posterior means of the true d and c given the noisy ones, with the model's current
    expectations (and a Poisson-like variance plus the chains' Monte Carlo variance) as the prior;
    and each cell's share of the observation, prior variance / (prior variance + noise variance)
    (1 for exact tables), which scales the cell's curvature."""
    d_t, c_t = d_obs.copy(), c_obs.copy()
    w_d, w_c = np.ones_like(d_t), np.ones_like(c_t)
    for t, rows in groups:
        var_d = d_hat[rows] * (1 + scale) + 1.0
        var_c = c_hat[rows] * (1 + scale) + 1.0
        d_t[rows] = t.posterior_mean(d_hat[rows], var_d, observed=d_obs[rows])
        c_t[rows] = t.posterior_mean(c_hat[rows], var_c, observed=c_obs[rows])
        w_d[rows] = var_d / (var_d + t.variance)
        w_c[rows] = var_c / (var_c + t.variance)
    d_t = np.clip(d_t, 0, None)
    c_t = np.clip(c_t, 0, d_t)
    return d_t, c_t, w_d, w_c
