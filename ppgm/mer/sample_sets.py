"""Statistics pooled from overlapping sample sets (Chandrasekaran, Johnson, Willsky 2007, Eqs. 5-6).

Several sample sets each observe their own subset V_k of the variables. A node statistic pools every
set that observed the node (N_v = sum of N_k over those sets); an edge statistic pools every set
that observed both ends (N_E). Node and edge statistics therefore disagree on overlaps, which is the
inconsistency the MER program relaxes.

Discrete statistics are count tables carried as :class:`~ppgm.models.measurement.Measurement` objects
(exact counts, ``n`` the pooled sample size); Gaussian statistics are second moments about the
pooled means, carried as :class:`Moments`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Hashable, Sequence

import numpy as np

from ..factors.domain import Domain
from ..factors.records import cell_index, check_records
from ..models.measurement import Measurement


@dataclass(frozen=True)
class SampleSet:
    """``values`` (N_k rows) observed over ``variables`` (one column each).

    Parameters
    ----------
    variables : tuple
    values : numpy.ndarray, shape (N_k, len(variables))

    Examples
    --------
    >>> SampleSet(("a", "b"), np.zeros((3, 2))).n
    3
    """

    variables: tuple
    values: np.ndarray

    def __post_init__(self) -> None:
        variables = tuple(self.variables)
        values = np.asarray(self.values)
        if values.ndim != 2 or values.shape[1] != len(variables):
            raise ValueError(f"values: expected shape (N, {len(variables)}) for variables {variables}, got {values.shape}")
        if len(set(variables)) != len(variables):
            raise ValueError(f"variables: duplicate names in {variables}")
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "values", values)

    @property
    def n(self) -> int:
        return int(self.values.shape[0])


@dataclass(frozen=True)
class Moments:
    """Second moments about the mean over ``variables`` from ``n`` samples.

    Parameters
    ----------
    variables : tuple
    covariance : numpy.ndarray
    n : int

    Examples
    --------
    >>> Moments(("a",), np.array([[2.0]]), 10).covariance.shape
    (1, 1)
    """

    variables: tuple
    covariance: np.ndarray
    n: int

    def __post_init__(self) -> None:
        cov = np.asarray(self.covariance, dtype=float)
        k = len(tuple(self.variables))
        if cov.shape != (k, k):
            raise ValueError(f"covariance: expected shape ({k}, {k}), got {cov.shape}")
        object.__setattr__(self, "variables", tuple(self.variables))
        object.__setattr__(self, "covariance", cov)


def constraint_scopes(
    sets: Sequence[SampleSet], variables: Sequence[Hashable], edges: Sequence[Sequence[Hashable]] | None = None
) -> tuple[list[tuple], list[tuple]]:
    """Node and edge scopes of the constraints, each edge in ``variables`` order.

    Without ``edges``, every pair observed together in some set is an edge (the paper's E = union of
    the complete graphs on the V_k). Given ``edges``, each must name two known variables that some
    set observed together.
    """
    variables = tuple(variables)
    pos = {v: i for i, v in enumerate(variables)}
    seen: set = set()
    together = set()
    for k, s in enumerate(sets):
        unknown = [v for v in s.variables if v not in pos]
        if unknown:
            raise ValueError(f"samples[{k}]: unknown variables {unknown}; expected names among {list(variables)}")
        seen.update(s.variables)
        for a, b in combinations(sorted(s.variables, key=pos.__getitem__), 2):
            together.add((a, b))
    missing = [v for v in variables if v not in seen]
    if missing:
        raise ValueError(f"variables: {missing} are not observed in any sample set")
    if edges is None:
        scoped = sorted(together, key=lambda e: (pos[e[0]], pos[e[1]]))
    else:
        scoped = []
        for e in edges:
            e = tuple(e)
            if len(e) != 2 or e[0] == e[1]:
                raise ValueError(f"edges: expected pairs of distinct variables, got {e!r}")
            bad = [v for v in e if v not in pos]
            if bad:
                raise ValueError(f"edges: unknown variables {bad} in {e!r}")
            e = tuple(sorted(e, key=pos.__getitem__))
            if e not in together:
                raise ValueError(f"edges: {e!r} is never observed jointly in one sample set, so it has no statistic")
            scoped.append(e)
        scoped = sorted(set(scoped), key=lambda e: (pos[e[0]], pos[e[1]]))
    return [(v,) for v in variables], scoped


def pooled_counts(
    sets: Sequence[SampleSet], domain: Domain, edges: Sequence[Sequence[Hashable]] | None = None
) -> tuple[list[Measurement], list[Measurement]]:
    """Node and edge count tables pooled over the sets that observed them (Eqs. 5-6).

    ``sets`` hold integer state codes. Returns exact-count measurements whose ``n`` is N_v or N_E.

    Parameters
    ----------
    sets : list of SampleSet
    domain : Domain
    edges : list of pairs, optional
        Default: every pair some set observed jointly.

    Returns
    -------
    nodes, edges : list of Measurement
        Count tables with ``n`` = the pooled sample size.

    Examples
    --------
    >>> d = Domain(("a", "b", "c"), (2, 2, 2))
    >>> s1 = SampleSet(("a", "b"), np.array([[0, 1], [1, 1]]))
    >>> s2 = SampleSet(("b", "c"), np.array([[0, 0]]))
    >>> nodes, edges = pooled_counts([s1, s2], d)
    >>> nodes[1].values.tolist(), nodes[1].n, [e.variables for e in edges]
    ([1.0, 2.0], 3.0, [('a', 'b'), ('b', 'c')])
    """
    node_scopes, edge_scopes = constraint_scopes(sets, domain.variables, edges)
    out: dict = {}
    for k, s in enumerate(sets):
        sub = Domain(s.variables, domain.shape(s.variables))
        codes = check_records(s.values, sub, f"samples[{k}]")
        members = set(s.variables)
        for scope in node_scopes + edge_scopes:
            if not set(scope) <= members:
                continue
            shape = domain.shape(scope)
            idx = cell_index(codes, sub.indices(scope), shape)
            counts = np.bincount(idx, minlength=int(np.prod(shape))).reshape(shape)
            total, n = out.get(scope, (0, 0))
            out[scope] = (total + counts, n + len(codes))
    for scope in node_scopes + edge_scopes:
        if out[scope][1] < 1:
            raise ValueError(f"samples: no rows observe {scope}")
    make = lambda scope: Measurement(scope, out[scope][0].astype(float), n=float(out[scope][1]))
    return [make(s) for s in node_scopes], [make(s) for s in edge_scopes]


def pooled_moments(
    sets: Sequence[SampleSet], variables: Sequence[Hashable], edges: Sequence[Sequence[Hashable]] | None = None
) -> tuple[dict, list[Moments], list[Moments]]:
    """Pooled means, node variances and edge covariances (Eqs. 5-6 for Gaussian statistics).

    Means pool every observation of a variable; second moments are taken about those pooled means,
    node moments over N_v rows and edge moments (a 2 x 2 block, whose diagonal generally differs from
    the node moments) over N_E rows. Raises for constant columns and for too few rows (fewer than
    two per statistic).

    Parameters
    ----------
    sets : list of SampleSet
    variables : sequence
    edges : list of pairs, optional

    Returns
    -------
    means : dict
    nodes, edges : list of Moments

    Examples
    --------
    >>> s1 = SampleSet(("a", "b"), np.array([[1.0, 2.0], [-1.0, 0.0], [0.0, -2.0]]))
    >>> s2 = SampleSet(("a",), np.array([[3.0], [-3.0]]))
    >>> means, nodes, edges = pooled_moments([s1, s2], ("a", "b"))
    >>> nodes[0].covariance.tolist(), nodes[0].n, edges[0].covariance.tolist()
    ([[4.0]], 5, [[0.6666666666666666, 0.6666666666666666], [0.6666666666666666, 2.6666666666666665]])
    """
    node_scopes, edge_scopes = constraint_scopes(sets, variables, edges)
    arrays = []
    for k, s in enumerate(sets):
        x = np.asarray(s.values, dtype=float)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"samples[{k}]: contains NaN or infinite values")
        arrays.append(x)
    sums: dict = {}
    counts: dict = {}
    for s, x in zip(sets, arrays):
        for j, v in enumerate(s.variables):
            sums[v] = sums.get(v, 0.0) + x[:, j].sum()
            counts[v] = counts.get(v, 0) + len(x)
    means = {v: sums[v] / counts[v] for v in variables}
    acc: dict = {}
    for s, x in zip(sets, arrays):
        z = x - np.array([means[v] for v in s.variables])
        col = {v: j for j, v in enumerate(s.variables)}
        gram = z.T @ z
        for scope in node_scopes + edge_scopes:
            if set(scope) <= set(col):
                idx = [col[v] for v in scope]
                m, n = acc.get(scope, (0.0, 0))
                acc[scope] = (m + gram[np.ix_(idx, idx)], n + len(x))
    def make(scope):
        m, n = acc[scope]
        if n < 2:
            raise ValueError(f"samples: {scope} is observed in only {n} row(s); at least 2 are needed")
        cov = m / n
        # constant: a variance at the rounding level of the column's own mean (scale-free: columns in
        # units far apart are compared each with itself, never with one another)
        floor = np.array([(1e-12 * abs(means[v])) ** 2 for v in scope])
        if np.any(np.diag(cov) <= np.maximum(floor, 1e-300)):
            raise ValueError(f"samples: {scope} has a constant column (zero variance); drop it or add noise")
        if len(scope) == 2 and np.linalg.det(cov) <= 1e-12 * cov[0, 0] * cov[1, 1]:
            raise ValueError(f"samples: the pair {scope} is perfectly correlated; its covariance is singular")
        return Moments(scope, cov, int(n))
    return means, [make(s) for s in node_scopes], [make(s) for s in edge_scopes]
