"""What is learned and what is observed: Markov networks (potentials over cliques, optionally tied),
Bayesian networks and their CPTs, ``Measurement`` (a table over a clique with its noise law, record count
and optional label sums), the noise laws themselves, and random models for tests and benchmarks.

May import: ``ppgm.core``, ``ppgm.factors``.
"""
