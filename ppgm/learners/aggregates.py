"""Aggregated data: per-cell record counts d and label sums c over single features and feature pairs.

This is the shape of a privacy-preserving aggregation API (Gilotte, Ben Yahmed, Rohde): for each
table (one feature, or a pair of features) and each of its cells, how many records fall there and
how many of them are positive. Tables are :class:`~ppgm.models.measurement.Measurement` objects with
``label_sums``; a large pair table may be hashed into ``hash_size`` buckets (``buckets`` maps
cells to buckets, drawn once from a seeded generator: reproducible, never Python's ``hash``).
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np

from ..core.executor import Blocks, InProcess
from ..factors.domain import Domain
from ..factors.records import cell_index, check_records
from ..models.measurement import Measurement
from ..privacy.mechanisms import PrivacyAccountant


def table_scopes(features: Sequence, pairs="all") -> list[tuple]:
    """Scopes of the aggregated tables: every single feature, then the requested pairs.

    ``pairs`` is ``"all"``, ``"none"`` or a list of feature pairs.

    Examples
    --------
    >>> table_scopes(["a", "b", "c"], pairs=[("c", "a")])
    [('a',), ('b',), ('c',), ('a', 'c')]
    """
    features = list(features)
    pos = {f: i for i, f in enumerate(features)}
    singles = [(f,) for f in features]
    if isinstance(pairs, str):
        if pairs == "all":
            return singles + list(combinations(features, 2))
        if pairs == "none":
            return singles
        raise ValueError(f"pairs: expected 'all', 'none' or a list of feature pairs, got {pairs!r}")
    out = []
    for p in pairs:
        p = tuple(p)
        if len(p) != 2 or p[0] == p[1] or any(f not in pos for f in p):
            raise ValueError(f"pairs: {p!r} is not a pair of two distinct features among {features}")
        p = tuple(sorted(p, key=pos.__getitem__))
        if p not in out:
            out.append(p)
    return singles + out


def hash_buckets(n_cells: int, hash_size: int, key: int) -> np.ndarray:
    """Bucket of each of ``n_cells`` cells among ``hash_size``: uniform draws from a generator seeded by
    ``key`` (the same key always gives the same map).

    Examples
    --------
    >>> bool((hash_buckets(6, 4, key=7) == hash_buckets(6, 4, key=7)).all())
    True
    """
    return np.random.default_rng([int(key), int(n_cells), int(hash_size)]).integers(0, hash_size, size=n_cells)


def aggregate_records(
    records,
    labels,
    domain: Domain,
    scopes: Sequence[Sequence],
    hash_size: int | None = None,
    hash_seed: int = 0,
    publish_n: bool = True,
) -> list[Measurement]:
    """Counts d and label sums c of every table in ``scopes`` from integer-coded records.

    Tables with more than ``hash_size`` cells are hashed into ``hash_size`` buckets.

    Examples
    --------
    >>> d = Domain(("a", "b"), (2, 2))
    >>> t = aggregate_records([[0, 1], [1, 1], [0, 1]], [1, 0, 1], d, [("a",), ("a", "b")])
    >>> t[0].values.tolist(), t[0].label_sums.tolist(), t[1].label_sums.tolist()
    ([2.0, 1.0], [2.0, 0.0], [[0.0, 2.0], [0.0, 0.0]])
    """
    rec = check_records(records, domain)
    return aggregate_blocks(InProcess().scatter([(rec, labels)]), domain, scopes, hash_size, hash_seed, publish_n)


def aggregate_blocks(
    blocks: Blocks,
    domain: Domain,
    scopes: Sequence[Sequence],
    hash_size: int | None = None,
    hash_seed: int = 0,
    publish_n: bool = True,
) -> list[Measurement]:
    """:func:`aggregate_records` over blocks of ``(codes, labels)`` (``ppgm.core.executor``; e.g. Dask
    partitions): each block's tables where it lives, summed.

    Examples
    --------
    >>> d = Domain(("a",), (2,))
    >>> blocks = InProcess().scatter([(np.array([[0], [1]]), [1, 0]), (np.array([[0]]), [1])])
    >>> t = aggregate_blocks(blocks, d, [("a",)])[0]
    >>> t.values.tolist(), t.label_sums.tolist(), t.n
    ([2.0, 1.0], [2.0, 0.0], 3.0)
    """
    if hash_size is not None and int(hash_size) < 1:
        raise ValueError(f"hash_size: expected a positive number of buckets, got {hash_size!r}")
    scopes = [domain.check(scope, "scopes") for scope in scopes]
    maps = [_bucket_map(domain, tuple(scope), k, hash_size, hash_seed) for k, scope in enumerate(scopes)]
    summed = blocks.reduce(_aggregate_block, domain=domain, maps=maps)
    if summed is None:
        raise ValueError("records: no records to aggregate (empty data)")
    n = float(summed[0])
    out = []
    for (scope, shape, buckets), d, c in zip(maps, summed[1::2], summed[2::2]):
        out.append(Measurement(scope, d.astype(float).reshape(shape), n=n if publish_n else None,
                               label_sums=c.astype(float).reshape(shape), buckets=buckets))
    return out


def _bucket_map(domain: Domain, scope: tuple, k: int, hash_size, hash_seed: int) -> tuple:
    """(scope, shape of the released table, bucket of every cell or None) of the k-th table."""
    shape = domain.shape(scope)
    size = int(np.prod(shape))
    if hash_size is not None and size > hash_size and len(scope) > 1:
        return scope, (int(hash_size),), hash_buckets(size, int(hash_size), hash_seed * 1_000_003 + k).reshape(shape)
    return scope, shape, None


def _aggregate_block(block, domain: Domain, maps: list) -> list | None:
    """[records, d_0, c_0, d_1, c_1, ...] of one block of (codes, labels); None when empty."""
    codes, labels = block
    rec = check_records(codes, domain)
    y = np.asarray(labels, dtype=float).ravel()
    if y.shape[0] != rec.shape[0]:
        raise ValueError(f"labels: expected {rec.shape[0]} labels (one per record), got {y.shape[0]}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels: expected binary labels (0 / 1)")
    if rec.shape[0] == 0:
        return None
    out = [rec.shape[0]]
    for scope, shape, buckets in maps:
        idx = cell_index(rec, domain.indices(scope), domain.shape(scope))
        if buckets is not None:
            idx = buckets.ravel()[idx]
        size = int(np.prod(shape))
        out += [np.bincount(idx, minlength=size), np.bincount(idx, weights=y, minlength=size)]
    return out


def release_aggregates(
    tables: Sequence[Measurement],
    mechanism,
    seed=None,
    accountant: PrivacyAccountant | None = None,
    publish_n: bool = False,
) -> list[Measurement]:
    """Noisy copies of aggregated tables through ``mechanism`` (discrete Laplace or Gaussian).

    Each record adds 1 to one cell of every table's d and at most 1 to one cell of its c, so a
    release of K tables is a release of 2K count tables: L1 sensitivity 2K (Laplace), L2 sqrt(2K)
    (Gaussian). The accountant, if given, is charged once. ``seed`` makes the noise reproducible and
    the release not private (see :meth:`ppgm.privacy.mechanisms.LaplaceMechanism.release`). ``publish_n``
    attaches the exact N of the tables, which the caller declares public.

    Examples
    --------
    >>> from ppgm.privacy.mechanisms import LaplaceMechanism
    >>> d = Domain(("a",), (2,))
    >>> exact = aggregate_records([[0], [1]], [1, 0], d, [("a",)])
    >>> noisy = release_aggregates(exact, LaplaceMechanism(1.0))
    >>> noisy[0].noise, noisy[0].scale, noisy[0].integer
    ('laplace', 2.0, True)
    """
    from ..privacy.mechanisms import noise_generator

    tables = _check_exact(tables)
    if accountant is not None:
        accountant.charge([{"what": "aggregates", **mechanism.cost}])
    n = tables[0].n if publish_n else None
    return noisy_aggregates(tables, mechanism, noise_generator(seed), n=n)


def _check_exact(tables: Sequence[Measurement]) -> list[Measurement]:
    tables = list(tables)
    if not tables:
        raise ValueError("tables: nothing to release")
    for t in tables:
        if t.label_sums is None or t.noise != "none":
            raise ValueError("tables: expected exact aggregated tables (counts with label sums)")
        if not (np.all(t.values == np.round(t.values)) and np.all(t.label_sums == np.round(t.label_sums))):
            raise ValueError(f"tables: the aggregated table over {t.variables} holds non-integer counts")
    return tables


def noisy_aggregates(tables: Sequence[Measurement], mechanism, rng: np.random.Generator | None = None,
                     n: float | None = None) -> list[Measurement]:
    """The noise of :func:`release_aggregates` without accounting: integer noise on the integer d and
    c, private when ``rng`` is None (see :meth:`ppgm.privacy.mechanisms.LaplaceMechanism.measure`).

    Examples
    --------
    >>> from ppgm.privacy.mechanisms import LaplaceMechanism
    >>> exact = aggregate_records([[0], [1]], [1, 0], Domain(("a",), (2,)), [("a",)])
    >>> noisy_aggregates(exact, LaplaceMechanism(1.0), np.random.default_rng(0))[0].label_sums.shape
    (2,)
    """
    from ..factors.factor import Factor

    tables = _check_exact(tables)
    flat = [Factor(("cell",), np.rint(t.values).astype(np.int64).ravel()) for t in tables]
    flat += [Factor(("cell",), np.rint(t.required_label_sums()).astype(np.int64).ravel()) for t in tables]
    noisy = mechanism.measure(flat, rng)
    k = len(tables)
    return [
        Measurement(
            t.variables, noisy[i].values.reshape(t.shape), noisy[i].noise, noisy[i].scale, n,
            label_sums=noisy[k + i].values.reshape(t.shape), buckets=t.buckets, integer=True,
        )
        for i, t in enumerate(tables)
    ]


def treat_as_exact(tables: Sequence[Measurement]) -> list[Measurement]:
    """Noisy aggregated tables read as if they were exact: counts clipped at 0 and label sums to
    [0, count] (the baseline that ignores the noise model).

    Examples
    --------
    >>> t = Measurement(("a",), [-2.0, 5.0], "laplace", 1.0, label_sums=[1.0, 7.0])
    >>> e = treat_as_exact([t])[0]
    >>> e.noise, e.values.tolist(), e.label_sums.tolist()
    ('none', [0.0, 5.0], [0.0, 5.0])
    """
    out = []
    for t in tables:
        d = np.clip(t.values, 0, None)
        out.append(Measurement(t.variables, d, n=t.n, label_sums=np.clip(t.required_label_sums(), 0, d), buckets=t.buckets))
    return out


def xor_aggregates(n: float = 1e6):
    """Exact aggregates of the MaxEnt paper's counter-example (Sec. 4.2): X1, X2 fair coins,
    X3 = X1 xor X2, P(y = 1 | x) = 0.25 + 0.5 x3; every single and pair table, expected counts for
    ``n`` records. Pairwise tables cannot see the xor: the maximum-entropy model predicts 0.9 / 0.1
    where the truth is 0.75 / 0.25. Returns ``(domain, tables)``.

    Examples
    --------
    >>> dom, tables = xor_aggregates(100)
    >>> len(tables), tables[-1].variables, tables[-1].label_sums.tolist()
    (6, ('x2', 'x3'), [[6.25, 18.75], [6.25, 18.75]])
    """
    dom = Domain(("x1", "x2", "x3"), (2, 2, 2))
    X = np.array([[a, b, a ^ b] for a in (0, 1) for b in (0, 1)])
    p_y = 0.25 + 0.5 * X[:, 2]
    tables = []
    for scope in table_scopes(dom.variables, "all"):
        idx = [dom.index(v) for v in scope]
        d, c = np.zeros(dom.shape(scope)), np.zeros(dom.shape(scope))
        for row, p in zip(X, p_y):
            d[tuple(row[idx])] += n / 4
            c[tuple(row[idx])] += n / 4 * p
        tables.append(Measurement(scope, d, n=float(n), label_sums=c))
    return dom, tables
