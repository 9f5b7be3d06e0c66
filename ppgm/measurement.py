"""Measurements: a table over a clique plus how much to trust it.

One concept serves every learner that learns from tables rather than records: noisy counts and
their noise scale (CGM-EM), exact counts (``noise="none"``), and empirical marginals with the
number of records behind them (``n``). A measurement with noise is the noisy-observation factor
p(y_C | n_C) that ties the released table y_C to the true counts n_C.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .factor import Factor

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

    def __post_init__(self) -> None:
        variables = tuple(self.variables)
        values = np.asarray(self.values, dtype=float)
        if values.ndim != len(variables):
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
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "scale", scale)

    @property
    def shape(self) -> tuple:
        return self.values.shape

    @property
    def variance(self) -> float:
        """Noise variance of each cell."""
        return {"none": 0.0, "laplace": 2 * self.scale**2, "gaussian": self.scale**2}[self.noise]

    def as_factor(self) -> Factor:
        return Factor(self.variables, self.values)

    def log_likelihood(self, counts: np.ndarray) -> float:
        """log p(y | n) of true counts ``counts`` (same shape as ``values``)."""
        r = self.values - np.asarray(counts, dtype=float)
        if self.noise == "laplace":
            return float(-np.abs(r).sum() / self.scale - r.size * np.log(2 * self.scale))
        if self.noise == "gaussian":
            return float(-0.5 * (r**2).sum() / self.scale**2 - r.size * np.log(self.scale * np.sqrt(2 * np.pi)))
        raise ValueError("log_likelihood: an exact measurement has no noise model (noise='none')")

    def gradient(self, counts: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
        """d log p(y | n) / d n.

        Gaussian: (y - n) / sigma^2. Laplace: the subgradient sign(y - n) / b, which is 0 at the
        kink y = n; with ``smoothing = s > 0`` the absolute value is replaced by the pseudo-Huber
        function sqrt(r^2 + (s b)^2), whose gradient (y - n) / sqrt((y - n)^2 + (s b)^2) / b is smooth
        and tends to the subgradient as s -> 0 (fixed-point iterations need it to settle on cells
        that sit exactly at the kink).
        """
        r = self.values - np.asarray(counts, dtype=float)
        if self.noise == "gaussian":
            return r / self.scale**2
        if self.noise == "laplace":
            if smoothing > 0:
                return r / np.sqrt(r**2 + (smoothing * self.scale) ** 2) / self.scale
            return np.sign(r) / self.scale
        raise ValueError("gradient: an exact measurement has no noise model (noise='none')")
