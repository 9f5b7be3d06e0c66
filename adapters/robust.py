"""``RobustFilter``: pgmpy parameter estimator for epsilon-corrupted data (the eigenvector filter)."""

from __future__ import annotations

import numpy as np
from pgmpy.base import DAG
from pgmpy.models import DiscreteBayesianNetwork
from pgmpy.parameter_estimator.base import DiscreteParameterEstimator

from ppgm.core import checks
from ppgm.learners.binary_encoding import binary_encoding
from ppgm.models.cpts import empirical_cpts
from ppgm.factors.domain import Domain
from ppgm.learners.robust_filter import filter_known_topology
from ppgm.core.rng import as_generator

from .columns import bin_numeric
from .data import check_frame, check_known, check_rows, codes_or_unknown, encode, fit_states
from .models import tabular_cpds


class RobustFilter(DiscreteParameterEstimator):
    """Learn the CPTs of a known DAG when an ``epsilon`` fraction of the rows may be adversarial.

    Use it as any pgmpy parameter estimator: ``bn.fit(df, estimator=RobustFilter(epsilon=0.1))``.
    Rows are filtered with Filter-Known-Topology (Cheng, Diakonikolas, Kane, Stewart 2018) and the
    CPTs are the empirical conditionals of the rows kept (a parent configuration never seen gets the
    uniform row, as pgmpy's ``DiscreteMLE``); when the default mode finds a systematic batch (a
    second network with the DAG explaining some of the rows, by a likelihood-ratio test against BIC's
    penalty), they are the mixture's major component's (native encoding).

    Parameters
    ----------
    epsilon : float in (0, 1/2)
        The largest fraction of rows that may be corrupted: an upper bound on what the default mode
        removes (it removes nothing from clean data), the quota of the authors' modes.
    mode : {"calibrated", "paper", "single_pass", "iterative"}
        ``"calibrated"`` (default): remove rows only while the top eigenvalue exceeds what clean data
        of this size from the currently fitted network shows (a parametric bootstrap), and only as
        many as the excess of extreme scores over clean data warrants, then check for a systematic
        batch (a two-network mixture against one network, by BIC); ``"paper"``: Algorithm 1
        with its stopping rule and constants on per-configuration whitened coordinates;
        ``"single_pass"``: one eigenvector, drop the ``epsilon * N`` most extreme rows (what the
        authors ran); ``"iterative"``: the same in ``rounds`` passes. See
        ``ppgm.learners.robust_filter.filter_known_topology``.
    rounds : int
        Passes of the iterative mode.
    encoding : {"native", "binary"}
        Filter on the categorical coordinates directly (one per node, parent configuration and state
        but one, diagonal blocks zeroed), or on the authors' binary encoding of the network.
    C : float
        Constant of the paper-mode stopping rule.
    max_rounds : int
        Round limit of the calibrated and paper modes.
    seed : int, optional
        Lanczos start vectors, bootstrap draws, tie-breaking and the binary encoding's phantom states.
    progress : bool
        Show a progress bar.
    state_names : dict, optional
        ``{variable: states}``; variables not given take the sorted values seen in the data. A
        numeric column takes an object instead (``{"bins": 10}``, ``{"min": 0, "max": 90, "edges":
        [...]}``: :func:`ppgm.adapters.columns.bin_numeric`); its CPTs are over its bins, and
        ``schema_`` codes new records the same way.

    Attributes
    ----------
    parameters_ : list of TabularCPD
    inlier_mask_ : numpy.ndarray of bool
        One entry per input row: True if the row was kept.
    estimated_fraction_ : float
        The corrupted fraction the filter estimates (calibrated mode: the excess of extreme scores
        over clean data; other modes: the fraction removed).
    history_ : list of dict
        Per filtering round: ``eigenvalue``, ``null_threshold`` (the largest eigenvalue clean data
        would show, calibrated mode), ``threshold`` (the score cut), ``removed``, ``kept``,
        ``estimated_fraction``, and why the filter ``stopped``; the last round's ``mixture`` holds
        the default mode's check for a systematic batch (``gain``, ``penalty``, ``weight``,
        ``accepted``, ``reason``).
    state_names_ : dict

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example, sample
    >>> asia = load_bif_example("asia")
    >>> df = sample(asia, 5000, seed=0)
    >>> est = RobustFilter(epsilon=0.05, seed=0, progress=False).fit(asia, df)
    >>> int((~est.inlier_mask_).sum()), est.history_[-1]["stopped"]   # clean data: nothing removed
    (0, 'eigenvalue within the clean-data range')
    """

    _tags = {
        "supported_model_types": (DAG, DiscreteBayesianNetwork),
        "supports_latent_variables": False,
        "supports_weighted_data": False,
        "supports_missing_data": False,
    }

    def __init__(
        self,
        epsilon: float = 0.1,
        mode: str = "calibrated",
        encoding: str = "native",
        C: float = 1.0,
        max_rounds: int = 10,
        rounds: int = 4,
        seed: int | None = None,
        progress: bool = True,
        state_names: dict | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.mode = mode
        self.encoding = encoding
        self.C = C
        self.max_rounds = max_rounds
        self.rounds = rounds
        self.seed = seed
        self.progress = progress
        super().__init__(state_names=state_names)

    def _build_fitted_state_names(self, model, data) -> dict:
        """The states of every node: declared ones, else read from the data by ppgm's rule
        (:func:`ppgm.adapters.data.sorted_states`: one kind per column), not pgmpy's."""
        declared = self._declared
        return {v: list(declared[v]) if v in declared else list(self._read_states[v]) for v in data.columns if v in model.nodes()}

    def fit(self, model, data, sample_weight=None):
        """Filter ``data`` and estimate the CPTs of ``model``'s DAG (pgmpy calls this from
        ``bn.fit(df, estimator=RobustFilter(...))``).

        Parameters
        ----------
        model : DiscreteBayesianNetwork or DAG
            The known topology.
        data : pandas.DataFrame
            One row per record, a column per node.
        sample_weight : None
            Weighted rows are not supported (pgmpy's estimator interface).

        Returns
        -------
        RobustFilter
            ``self``, with ``parameters_``, ``inlier_mask_``, ``estimated_fraction_`` and ``history_``.

        Raises
        ------
        TypeError, ValueError
            Not a DataFrame, no rows, values outside ``state_names``, bad settings.

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example, sample
        >>> asia = load_bif_example("asia")
        >>> est = RobustFilter(epsilon=0.1, seed=0, progress=False).fit(asia, sample(asia, 3000, seed=1))
        >>> len(est.parameters_), est.estimated_fraction_
        (8, 0.0)
        """
        if not (isinstance(self.epsilon, (int, float, np.floating)) and 0 < self.epsilon < 0.5):
            raise ValueError(f"epsilon: expected a corrupted fraction in (0, 1/2), got {self.epsilon!r}")
        checks.choice(self.encoding, "encoding", ("native", "binary"))
        checks.flag(self.progress, "progress")
        check_frame(data, "data")
        check_rows(data, "data", fit=True, minimum=2)  # the filter compares records
        nodes = list(model.nodes()) if hasattr(model, "nodes") else []
        absent = [v for v in nodes if v not in data.columns and v not in getattr(model, "latents", set())]
        if absent:
            raise ValueError(f"data: the model's nodes {absent} are not columns of the data (it has {list(data.columns)})")
        data, names, self.schema_ = bin_numeric(data, self.state_names)
        declared = self._declared = checks.state_names(names)
        given = [v for v in declared if v in data.columns]
        if given:  # values outside the declared states (or of another kind) are named before any work
            dom = Domain(tuple(given), tuple(len(declared[v]) for v in given), {v: declared[v] for v in given})
            check_known(data, dom, codes_or_unknown(data, dom), "state_names", missing_ok=True)
        self._read_states = fit_states(data, [v for v in data.columns if v not in declared and v in model.nodes()])
        empty = [v for v, states in self._read_states.items() if not states]
        if empty:
            raise ValueError(f"data: columns {empty} have no values to read states from; the filter takes no missing values")
        as_generator(self.seed)  # checked before any work
        self._initialize_fit(model, data, sample_weight=sample_weight)
        m = self._model
        nodes = list(m.nodes())
        states = self.state_names_
        dom = Domain(tuple(nodes), tuple(len(states[v]) for v in nodes), {v: states[v] for v in nodes})
        parents = {v: tuple(m.get_parents(v)) for v in nodes}
        cards = max(dom.cards, default=1)
        records = encode(self._data, dom, dtype=np.int8 if cards <= 127 else np.int16 if cards <= 32767 else np.int64)
        rng = as_generator(self.seed)
        kw = dict(mode=self.mode, C=self.C, max_rounds=self.max_rounds, rounds=self.rounds, seed=rng, progress=self.progress)
        if self.encoding == "native":
            res = filter_known_topology(records, dom, parents, self.epsilon, **kw)
            bn = res.model
        else:
            enc = binary_encoding(dom, parents)
            bits = enc.encode_records(records, seed=rng)
            res = filter_known_topology(bits, enc.domain, enc.parents, self.epsilon, **kw)
            bn = empirical_cpts(records, dom, parents, rows=np.flatnonzero(res.inlier_mask))
        self.inlier_mask_ = res.inlier_mask
        self.estimated_fraction_ = res.estimated_fraction
        self.history_ = res.history
        self.parameters_ = self._sort_parameters(tabular_cpds(bn))
        return self
