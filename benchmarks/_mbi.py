"""private-pgm (PyPI ``mbi``) as the CGM benchmarks run it: JAX in float64 with its compilation cache off
(so that a first call is a cold one), MirrorDescent with its defaults on the noisy tables, and the fit
back as a ppgm network. ``mbi`` is None when the package is not installed (it is not a ppgm dependency)."""

from __future__ import annotations

import numpy as np

from ppgm import Factor, MarkovNetwork

try:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)  # cold means cold
    import mbi
except ImportError:  # pragma: no cover
    mbi = None


class MirrorDescentFit:
    """One loss over fixed noisy tables; :meth:`__call__` runs MirrorDescent and returns the network and
    the iterations it took (mbi checks its ``tol`` rule every 50)."""

    def __init__(self, domain, measurements, N: float, norm: str = "l2"):
        self.domain, self.N = domain, float(N)
        self.dom = mbi.Domain(list(domain.variables), list(domain.cards))
        meas = [mbi.LinearMeasurement(y.values.ravel(), y.variables, stddev=float(np.sqrt(y.variance))) for y in measurements]
        self.loss = mbi.marginal_loss.from_linear_measurements(meas, self.dom, norm=norm)

    def __call__(self, iters: int, tol: float | None) -> tuple[MarkovNetwork, int]:
        blocks = [0]

        def count(_):
            blocks[0] += 1

        model = mbi.estimation.MirrorDescent().estimate(self.dom, self.loss, known_total=self.N, iters=iters, tol=tol,
                                                        callback_fn=count)
        factors = [Factor(tuple(model.potentials[c].domain.attributes), np.asarray(model.potentials[c].values, float))
                   for c in model.potentials.cliques]
        return MarkovNetwork(self.domain, factors), 50 * blocks[0]
