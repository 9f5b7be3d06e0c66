"""Random models used by the papers' experiments, the tests, the demo and the benchmarks."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np

from ..core import checks
from ..core.rng import as_generator
from ..factors.domain import Domain
from ..factors.factor import Factor
from .bayes import BayesianNetwork
from .markov import MarkovNetwork

MAX_VARS = 100_000  # generated models: beyond this a mistyped size only fills memory


def pairwise_dirichlet(edges, n_vars: int, k: int, alpha: float = 1.0, seed=None, names=None) -> MarkovNetwork:
    """Pairwise model whose edge tables (k x k) are Dirichlet(alpha) draws over their k^2 cells.

    This is the potential family of the CGM paper's synthetic experiments (Sec. 4.1).

    Examples
    --------
    >>> pairwise_dirichlet([(0, 1)], 2, 3, seed=0).scopes
    [('X0', 'X1')]
    """
    n_vars, k = checks.count(n_vars, "n_vars", 2, MAX_VARS), checks.count(k, "k")
    alpha = checks.positive(alpha, "alpha")
    rng = as_generator(seed)
    names = list(names) if names is not None else [f"X{i}" for i in range(n_vars)]
    dom = Domain(tuple(names), (k,) * n_vars)
    factors = []
    for a, b in edges:
        table = rng.dirichlet(np.full(k * k, alpha)).reshape(k, k)
        with np.errstate(divide="ignore"):
            factors.append(Factor((names[a], names[b]), np.log(table)))
    return MarkovNetwork(dom, factors)


def third_order_chain(n_vars: int = 10, k: int = 10, alpha: float = 1.0, seed=None) -> MarkovNetwork:
    """Edges i - j for 1 <= |i - j| <= 3 with Dirichlet(alpha) edge tables."""
    n_vars = checks.count(n_vars, "n_vars", 2, MAX_VARS)
    edges = [(i, j) for i in range(n_vars) for j in range(i + 1, min(i + 4, n_vars))]
    return pairwise_dirichlet(edges, n_vars, k, alpha, seed)


def erdos_renyi(n_vars: int = 10, k: int = 10, p: float = 0.3, alpha: float = 1.0, seed=None) -> MarkovNetwork:
    """A connected Erdos-Renyi graph (redrawn until connected) with Dirichlet(alpha) edge tables."""
    rng = as_generator(seed)
    for _ in range(1000):
        g = nx.gnp_random_graph(n_vars, p, seed=int(rng.integers(2**31)))
        if nx.is_connected(g):
            return pairwise_dirichlet(sorted(g.edges()), n_vars, k, alpha, rng)
    raise ValueError(f"p={p}: could not draw a connected graph on {n_vars} nodes")


def grid(rows: int, cols: int, k: int = 2, coupling: float = 1.0, field: float = 0.5, seed=None) -> MarkovNetwork:
    """A rows x cols grid with Gaussian random pairwise log-potentials (std ``coupling``) and unary
    log-potentials (std ``field``), for loopy BP."""
    rng = as_generator(seed)
    names = [f"G{r}_{c}" for r in range(rows) for c in range(cols)]
    dom = Domain(tuple(names), (k,) * len(names))
    factors = [Factor((v,), rng.normal(0, field, k)) for v in names]
    for r, c in itertools.product(range(rows), range(cols)):
        for dr, dc in ((0, 1), (1, 0)):
            if r + dr < rows and c + dc < cols:
                factors.append(Factor((f"G{r}_{c}", f"G{r + dr}_{c + dc}"), rng.normal(0, coupling, (k, k))))
    return MarkovNetwork(dom, factors)


def random_bayesian_network(
    n_vars: int, k: int | tuple = 2, max_parents: int = 2, alpha: float = 1.0, seed=None
) -> BayesianNetwork:
    """A random DAG (each node picks up to ``max_parents`` earlier nodes) with Dirichlet(alpha) CPT rows."""
    rng = as_generator(seed)
    names = tuple(f"V{i}" for i in range(n_vars))
    cards = (k,) * n_vars if np.isscalar(k) else tuple(k)  # type: ignore[arg-type]  # a card or one per variable
    dom = Domain(names, cards)
    parents, cpts = {}, {}
    for i, v in enumerate(names):
        m = int(rng.integers(0, min(max_parents, i) + 1))
        ps = tuple(names[j] for j in sorted(rng.choice(i, size=m, replace=False))) if m else ()
        parents[v] = ps
        rows = dom.size(ps)
        cpts[v] = rng.dirichlet(np.full(cards[i], alpha), size=rows).reshape(dom.shape(ps) + (cards[i],))
    return BayesianNetwork(dom, parents, cpts)


def gaussian_cycle(n_vars: int = 16, chords: int = 0, low: float = 0.25, high: float = 0.4, seed=None):
    """Information matrix J of a Gaussian cycle (plus random chords), unit diagonal.

    Off-diagonal entries have magnitude uniform in [low, high] and a random sign; the diagonal is
    raised where needed so that J is diagonally dominant (hence positive definite), then J is scaled
    to unit diagonal. Returns ``(J, edges)`` with edges as index pairs (i < j). This is the MER
    paper's 16-node cycle for ``chords=0``.

    Examples
    --------
    >>> J, edges = gaussian_cycle(5, seed=0)
    >>> len(edges), bool(np.all(np.linalg.eigvalsh(J) > 0))
    (5, True)
    """
    rng = as_generator(seed)
    edges = {tuple(sorted((i, (i + 1) % n_vars))) for i in range(n_vars)}
    pool = [e for e in itertools.combinations(range(n_vars), 2) if e not in edges]
    if chords > len(pool):
        raise ValueError(f"chords: at most {len(pool)} chords fit on {n_vars} variables, got {chords}")
    for t in rng.choice(len(pool), size=chords, replace=False) if chords else []:
        edges.add(pool[int(t)])
    edge_list = sorted(edges)
    J = np.zeros((n_vars, n_vars))
    for i, j in edge_list:
        J[i, j] = J[j, i] = rng.uniform(low, high) * rng.choice([-1.0, 1.0])
    d = np.maximum(1.0, np.abs(J).sum(axis=1) + 0.1)
    J[np.diag_indices(n_vars)] = d
    s = 1 / np.sqrt(d)
    return J * np.outer(s, s), edge_list


def overlapping_sample_sets(cov: np.ndarray, windows=(3, 5), extra: int = 3, extra_size=(3, 5), n_range=(100, 1000), seed=None):
    """Sample sets over windows of consecutive variables (cyclically) plus random subsets.

    Windows of ``windows[0]..windows[1]`` consecutive indices start at 0 and tile the cycle with an
    overlap of at least one variable; ``extra`` further sets pick ``extra_size`` variables at random.
    Each set has N_k uniform in ``n_range`` rows drawn from N(0, cov) restricted to its variables.
    Returns a list of ``(indices, rows)``.

    Examples
    --------
    >>> sets = overlapping_sample_sets(np.eye(6), seed=0)
    >>> sorted(set().union(*(set(ix) for ix, _ in sets))) == list(range(6))
    True
    """
    rng = as_generator(seed)
    n = cov.shape[0]
    subsets, start = [], 0
    while start < n:
        w = int(rng.integers(windows[0], windows[1] + 1))
        subsets.append([(start + t) % n for t in range(w)])
        start += w - 1
    for _ in range(extra):
        size = int(rng.integers(extra_size[0], extra_size[1] + 1))
        subsets.append(sorted(rng.choice(n, size=min(size, n), replace=False).tolist()))
    out = []
    for ix in subsets:
        ix = sorted(set(ix))
        m = int(rng.integers(n_range[0], n_range[1] + 1))
        rows = rng.multivariate_normal(np.zeros(len(ix)), cov[np.ix_(ix, ix)], size=m)
        out.append((ix, rows))
    return out


def mobility_chain(locations: int = 5, hours: int = 24, stay: float = 0.8, offline: float = 0.05, seed=None) -> MarkovNetwork:
    """A time-homogeneous chain of where a person is, hour by hour (the CGM paper's Wi-Fi study, Sec. 4.2).

    States: ``0`` (offline, the null state) and locations ``1 .. locations``. One transition matrix
    for every pair of adjacent hours: a person stays with probability ``stay``, goes offline with
    probability ``offline``, else moves to one of two neighbouring locations (on a ring) with random
    weights; an offline person comes back to a random location. The first hour has its own
    distribution. Factors: log P(h0) on ``h00`` and log P(h_t+1 | h_t) on every pair, so Z = 1.

    Parameters
    ----------
    locations : int
        Number of locations L (>= 2); each hour has L + 1 states.
    hours : int
        Time steps (>= 2); variables ``h00``, ``h01``, ...
    stay, offline : float
        Probabilities of staying and of going offline in an hour.
    seed : int or numpy.random.Generator, optional

    Returns
    -------
    MarkovNetwork

    Examples
    --------
    >>> m = mobility_chain(3, 4, seed=0)
    >>> m.domain.variables, [f.variables for f in m.factors][:2]
    (('h00', 'h01', 'h02', 'h03'), [('h00',), ('h00', 'h01')])
    """
    locations, hours = checks.count(locations, "locations"), checks.count(hours, "hours")
    if locations < 2 or hours < 2:
        raise ValueError(f"locations, hours: expected at least 2 each, got {locations}, {hours}")
    checks.in_range(stay, "stay", 0.0, 1.0)
    checks.in_range(offline, "offline", 0.0, 1.0)
    if stay + offline >= 1:
        raise ValueError(f"stay + offline: expected below 1 (room to move), got {stay + offline}")
    rng = as_generator(seed)
    K = locations + 1
    T = np.zeros((K, K))
    T[0, 1:] = rng.dirichlet(np.ones(locations))
    for loc in range(1, K):
        left, right = (loc - 2) % locations + 1, loc % locations + 1
        w = rng.dirichlet([1.0, 1.0])
        T[loc, loc] += stay
        T[loc, 0] += offline
        T[loc, left] += (1 - stay - offline) * w[0]
        T[loc, right] += (1 - stay - offline) * w[1]
    first = rng.dirichlet(np.ones(K))
    names = tuple(f"h{t:02d}" for t in range(hours))
    dom = Domain(names, (K,) * hours)
    with np.errstate(divide="ignore"):
        logT, logp = np.log(T), np.log(first)
    return MarkovNetwork(dom, [Factor((names[0],), logp)] + [Factor((names[t], names[t + 1]), logT) for t in range(hours - 1)])
