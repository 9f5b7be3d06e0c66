"""Private choice of what to release: report-noisy-max and MST's pair selection, and AIM's adaptive rounds
that measure the workload's worst-fitted marginals and refit the model after each.

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``, ``ppgm.inference``, ``ppgm.privacy`` (the noise),
``ppgm.learners`` (the fits), ``ppgm.mer``.
"""
