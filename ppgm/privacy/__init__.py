"""Differential privacy: the discrete Laplace and Gaussian mechanisms on integer tables, the privacy
accountant (pure and zero-concentrated DP), bounded contributions per individual, private quantiles
for public bin edges, numeric columns' bins read from a noisy fine histogram, and a statistical audit of a
mechanism's epsilon (``audit``).

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``.
"""
