"""The estimators: the marginal fit behind every Markov-network learner (``fit_marginals``, with its gauge
projection, truncated Newton and simplex projection), the naive MLE and CGM-EM on noisy tables with the
rules that choose their regularisation from the release, aggregates and MaxEnt by persistent
contrastive divergence with its rules, the eigenvector filter for corrupted records, and EM over records
with missing values.

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``, ``ppgm.inference``, ``ppgm.privacy``.
"""
