"""Differential privacy: the discrete Laplace and Gaussian mechanisms on integer tables, the privacy
accountant (pure and zero-concentrated DP), bounded contributions per individual, private quantiles
for public bin edges, and numeric columns' bins read from a noisy fine histogram.

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``.
"""
