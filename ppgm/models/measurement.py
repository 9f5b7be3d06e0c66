"""Measurements: a table over a clique plus how much to trust it.

One concept serves every learner that learns from tables rather than records: noisy counts and
their noise scale (CGM-EM), counts with the label sum of every cell (MaxEnt from aggregates, noisy or
not, optionally hashed into buckets), and empirical counts with the number of records behind them
(``n``, MER). A measurement with noise is the noisy-observation factor p(y_C | n_C) that ties the
released table y_C to the true counts n_C.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..factors.factor import Factor
from .noise import noise_logpmf, noise_variance

NOISES = ("none", "laplace", "gaussian")


@dataclass(frozen=True)
class Measurement:
    """An observed table over ``variables``.

    Parameters
    ----------
    variables : tuple
        The clique (axis names of ``values``).
    values : numpy.ndarray
        The observed table y_C (counts, noisy counts, or marginals), one axis per variable.
    noise : {"none", "laplace", "gaussian"}
        How y_C was produced from the true counts n_C: exactly, or with i.i.d. Laplace / Gaussian
        noise on every cell.
    scale : float
        The noise scale in the units of ``values``: Laplace b (variance 2 b^2), Gaussian sigma.
    n : float, optional
        The number of records behind the table, when it is known (public or released).
    label_sums : numpy.ndarray, optional
        Sum of a binary label over the records of every cell (same shape as ``values``, same noise
        model): the aggregated-data setting, where ``values`` are the counts d and these the c.
    buckets : numpy.ndarray of int, optional
        For a hashed table: the bucket of every cell of the clique (shape: the clique's table);
        ``values`` (and ``label_sums``) are then 1-D, one entry per bucket.
    integer : bool
        The noise was integer-valued (discrete Laplace / discrete Gaussian on integer counts, what
        private releases add). :attr:`variance` and :meth:`log_likelihood` are then those of the
        discrete law; for integer true counts its log-likelihood differs from the continuous one by
        a constant per cell, so the learners' continuous relaxation of n is unchanged.
    members : tuple of tuple, optional
        For a pooled table (tied cliques released as one): the cliques whose count tables it sums,
        each aligned axis by axis with ``values`` in the order its variables are written; the first
        is ``variables``. y = sum over members of n_member, plus one draw of noise per cell.

    Examples
    --------
    >>> y = Measurement(("A",), np.array([3.0, 7.0]), "laplace", 2.0)
    >>> round(y.log_likelihood(np.array([3.0, 5.0])), 6) == round(-2.0 / 2.0 - 2 * float(np.log(4.0)), 6)
    True
    """

    variables: tuple
    values: np.ndarray
    noise: str = "none"
    scale: float = 0.0
    n: float | None = None
    label_sums: np.ndarray | None = None
    buckets: np.ndarray | None = None
    integer: bool = False
    members: tuple | None = None

    def __post_init__(self) -> None:
        variables = tuple(self.variables)
        if self.members is not None:
            members = tuple(tuple(c) for c in self.members)
            if len(members) < 2 or members[0] != variables or any(len(c) != len(variables) for c in members):
                raise ValueError(f"members: expected two or more cliques of {len(variables)} variables, the first {variables}, "
                                 f"got {self.members!r}")
            if len({frozenset(c) for c in members}) < len(members):
                raise ValueError(f"members: a clique is pooled twice in {members}")
            if self.label_sums is not None or self.buckets is not None:
                raise ValueError("members: a pooled table has no label sums or buckets")
            object.__setattr__(self, "members", members)
        values = np.asarray(self.values, dtype=float)
        if self.buckets is not None:
            buckets = np.asarray(self.buckets)
            if buckets.ndim != len(variables) or buckets.dtype.kind not in "iu":
                raise ValueError(f"buckets: expected an integer array with {len(variables)} axes for {variables}")
            if values.ndim != 1 or (buckets.size and (buckets.min() < 0 or buckets.max() >= values.size)):
                raise ValueError(f"values: a hashed table holds one entry per bucket (1-D, > max bucket), got {values.shape}")
            object.__setattr__(self, "buckets", buckets.astype(np.int64))
        elif values.ndim != len(variables):
            raise ValueError(f"values: expected {len(variables)} axes for variables {variables}, got shape {values.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"values: the table over {variables} contains NaN or infinite entries")
        if self.noise not in NOISES:
            raise ValueError(f"noise: expected one of {NOISES}, got {self.noise!r}")
        scale = float(self.scale)
        if not np.isfinite(scale) or scale < 0 or (self.noise != "none" and scale == 0):
            raise ValueError(f"scale: expected a positive noise scale for noise={self.noise!r}, got {self.scale!r}")
        if self.noise == "none" and (values < 0).any():
            raise ValueError(f"values: exact counts over {variables} cannot be negative")
        if self.n is not None and not (np.isfinite(self.n) and self.n > 0):
            raise ValueError(f"n: expected a positive number of records, got {self.n!r}")
        if self.label_sums is not None:
            c = np.asarray(self.label_sums, dtype=float)
            if c.shape != values.shape:
                raise ValueError(f"label_sums: expected the shape of values {values.shape} over {variables}, got {c.shape}")
            if not np.all(np.isfinite(c)):
                raise ValueError(f"label_sums: the table over {variables} contains NaN or infinite entries")
            if self.noise == "none" and ((c < 0).any() or (c > values + 1e-9 * np.maximum(1, values)).any()):
                raise ValueError(f"label_sums: exact label sums over {variables} must lie in [0, count] in every cell (c <= d)")
            object.__setattr__(self, "label_sums", c)
        if self.integer and (self.noise == "none" or not np.all(values == np.round(values))):
            raise ValueError(f"integer: integer noise needs a noise law and whole-number values over {variables}")
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "integer", bool(self.integer))

    @property
    def shape(self) -> tuple:
        return self.values.shape

    @property
    def cliques(self) -> tuple:
        """The cliques this table counts: its members when pooled, else ``(variables,)``."""
        return self.members if self.members is not None else (self.variables,)

    @property
    def variance(self) -> float:
        """Noise variance of each cell (of the discrete law for integer noise)."""
        if self.noise == "none":
            return 0.0
        return noise_variance(self.noise, self.scale, self.integer)

    def required_label_sums(self) -> np.ndarray:
        """The label sums of an aggregated table; a ``ValueError`` naming the table if it has none.

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> Measurement(("A",), np.array([3.0, 7.0]), label_sums=np.array([1.0, 2.0])).required_label_sums().tolist()
        [1.0, 2.0]
        """
        if self.label_sums is None:
            raise ValueError(f"tables: the table over {self.variables} has no label sums")
        return self.label_sums

    def as_factor(self) -> Factor:
        """The observed table as a :class:`ppgm.Factor`.

        Returns
        -------
        Factor

        Examples
        --------
        >>> Measurement(("A",), np.array([3.0, 7.0])).as_factor().variables
        ('A',)
        """
        return Factor(self.variables, self.values)

    def log_likelihood(self, counts: np.ndarray) -> float:
        """log p(y | n) of true counts ``counts`` (same shape as ``values``): a log density for
        continuous noise, the log probability mass of the discrete law for integer noise.

        Parameters
        ----------
        counts : numpy.ndarray
            True counts n (same shape as ``values``).

        Returns
        -------
        float

        Raises
        ------
        ValueError
            For an exact measurement (no noise model).

        Examples
        --------
        >>> Measurement(("A",), np.array([3.0, 7.0]), "gaussian", 1.0).log_likelihood(np.array([3.0, 7.0])) < 0
        True
        """
        if self.noise == "none":
            raise ValueError("log_likelihood: an exact measurement has no noise model (noise='none')")
        r = self.values - np.asarray(counts, dtype=float)
        return float(noise_logpmf(self.noise, r, self.scale, self.integer).sum())

    def gradient(self, counts: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
        """d log p(y | n) / d n.

        Gaussian: (y - n) / sigma^2. Laplace: the subgradient sign(y - n) / b, which is 0 at the
        kink y = n; with ``smoothing = s > 0`` the absolute value is replaced by the pseudo-Huber
        function sqrt(r^2 + (s b)^2), whose gradient (y - n) / sqrt((y - n)^2 + (s b)^2) / b is smooth
        and tends to the subgradient as s -> 0 (fixed-point iterations need it to settle on cells
        that sit exactly at the kink).

        Parameters
        ----------
        counts : numpy.ndarray
        smoothing : float

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> Measurement(("A",), np.array([3.0, 7.0]), "gaussian", 2.0).gradient(np.array([1.0, 7.0])).tolist()
        [0.5, 0.0]
        """
        r = self.values - np.asarray(counts, dtype=float)
        if self.noise == "gaussian":
            return r / self.scale**2
        if self.noise == "laplace":
            if smoothing > 0:
                return r / np.sqrt(r**2 + (smoothing * self.scale) ** 2) / self.scale
            return np.sign(r) / self.scale
        raise ValueError("gradient: an exact measurement has no noise model (noise='none')")

    def posterior_mean(self, prior_mean, prior_var, observed=None) -> np.ndarray:
        """E[n | y] per cell under a Gaussian prior N(prior_mean, prior_var) on the true counts n.

        ``observed`` defaults to ``values`` (pass ``label_sums`` to treat those). Exact counts
        return ``observed``. Gaussian noise: the conjugate update. Laplace noise: the posterior is a
        mixture of two truncated Gaussians (n below and above y), whose mean is computed in log
        space (``scipy.special.log_ndtr``), so it stays finite however far y is from the prior.

        Parameters
        ----------
        prior_mean, prior_var : array-like
            The Gaussian prior on the true counts, per cell.
        observed : array-like, optional
            Default: ``values``.

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> m = Measurement(("A",), np.array([10.0, 50.0]), "gaussian", 2.0)
        >>> m.posterior_mean(np.array([20.0, 50.0]), np.array([4.0, 4.0])).tolist()
        [15.0, 50.0]
        """
        y = np.asarray(self.values if observed is None else observed, dtype=float)
        if self.noise == "none":
            return y.copy()
        m = np.broadcast_to(np.asarray(prior_mean, dtype=float), y.shape)
        v = np.maximum(np.broadcast_to(np.asarray(prior_var, dtype=float), y.shape), 1e-12)
        if self.noise == "gaussian":
            s2 = self.scale**2
            return m + v / (v + s2) * (y - m)
        from scipy.special import log_ndtr

        b, sd = self.scale, np.sqrt(v)
        m1, m2 = m + v / b, m - v / b  # tilted means below / above y
        a1, a2 = (y - m1) / sd, (m2 - y) / sd
        L1, L2 = log_ndtr(a1), log_ndtr(a2)  # each once: the costliest calls of a noisy MaxEnt step
        lw1 = (m - y) / b + L1
        lw2 = (y - m) / b + L2
        # inverse Mills ratios phi(a) / Phi(a), stable for very negative a
        r1 = np.exp(-0.5 * a1**2 - 0.5 * np.log(2 * np.pi) - L1)
        r2 = np.exp(-0.5 * a2**2 - 0.5 * np.log(2 * np.pi) - L2)
        mean1, mean2 = m1 - sd * r1, m2 + sd * r2
        top = np.maximum(lw1, lw2)
        w1, w2 = np.exp(lw1 - top), np.exp(lw2 - top)
        return (w1 * mean1 + w2 * mean2) / (w1 + w2)

