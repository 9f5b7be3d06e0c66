"""Differential privacy: the discrete Laplace and Gaussian mechanisms on integer tables, the privacy
accountant (pure and zero-concentrated DP), bounded contributions per individual, and private quantiles
for public bin edges.

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``.
"""
