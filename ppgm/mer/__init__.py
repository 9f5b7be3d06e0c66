"""Maximum entropy relaxation and its phase-I program INI (Chandrasekaran, Johnson, Willsky 2007): the
statistics pooled from overlapping sample sets, the convex program both share (tolerances, solver policy,
the choice of gamma, the result), and its Gaussian and discrete forms in cvxpy.

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``, ``ppgm.inference``.
"""
