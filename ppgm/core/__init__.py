"""What every layer stands on: argument checks, random generators from seeds, progress bars and
convergence warnings, the executor that runs work over blocks of records (in memory or, through the
adapters, on Dask), and the BLAS thread limit of the solvers' loops.

Imports nothing of ppgm.
"""
