"""Answers from a model: the junction tree and its log-space calibration, loopy belief propagation,
``infer`` (exact when the tree fits in memory, loopy otherwise), exact samplers, contingency tables of
records, and distances between models (KL, total variation, likelihoods).

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``.
"""
