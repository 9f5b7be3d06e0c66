"""Maximum entropy relaxation (MER) and its phase-I program INI (Chandrasekaran, Johnson, Willsky 2007).

Given node and edge statistics that may disagree on overlaps, MER maximises the entropy of a
globally consistent model subject to one KL-divergence tolerance per statistic,

    maximise H(eta)  subject to  D(eta_i || eta*_i) <= gamma * w_i,  w_i = (k_i / N_i) ** p,

where k_i is the number of free moment parameters of statistic i and N_i its pooled sample size.
INI is the same feasible set with gamma replaced by a variable s, minimised: its optimum s~ is the
smallest gamma for which MER is feasible.

Both programs are built once per data set as cvxpy problems on the junction tree of the
triangulated constraint graph (one moment block per clique, consistent on separators), with gamma a
cvxpy ``Parameter`` so that a sweep over gamma re-uses the compiled problem. The Gaussian and the
discrete programs (:mod:`ppgm.mer.gaussian`, :mod:`ppgm.mer.discrete`) supply the moment variables,
the entropy and the divergences; this module holds what they share: tolerances, the solver policy,
the choice of gamma and the result.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import cvxpy as cp
import networkx as nx
import numpy as np
from scipy import stats

#: The documented default: gamma is this multiple of INI's optimum s~ (see :func:`choose_gamma`).
DEFAULT_GAMMA_RATIO = 10.0
#: Relative slack below which a constraint counts as active.
ACTIVE_RTOL = 1e-4
#: A returned point whose divergence exceeds its tolerance by more than this fraction is reported
#: "optimal_inaccurate", whatever the solver said.
RESIDUAL_RTOL = 1e-3
OPTIMAL = ("optimal",)
#: A Gaussian program whose PSD cones cost more than this is solved by SCS (first order) before
#: Clarabel. The cost is sum over junction-tree cliques C of d_C ** 3, d_C = |C| (|C| + 1) / 2 the
#: size of C's covariance block as a vector: an interior point factorises a dense d_C x d_C block
#: per cone per iteration. Measured (benchmarks/RESULTS.md): n = 100, cost 3e6-6e6, Clarabel about
#: 1 s; n = 200, 2e8-3e8, Clarabel 5-70 s (its first answer often inaccurate), SCS 12-15 s;
#: n = 400, 1e10, Clarabel 404 s and 2.8 GB for INI alone, SCS about 9-18 s and 0.3 GB.
FIRST_ORDER_COST = 5e7


@dataclass
class Divergence:
    """One tolerance constraint: the divergence of the model's marginal on ``scope`` from the data's.

    ``expr`` is its scalar cvxpy expression, or None where the program holds its divergences as
    vectors (see :meth:`ConvexProgram._divergence_vectors`).
    """

    scope: tuple
    kind: str
    n: float
    dof: int
    expr: Any = None
    marginal: Any = None  # discrete programs: the model's marginal on the scope (a cvxpy expression)

    def weight(self, p: float) -> float:
        return (self.dof / self.n) ** p


@dataclass
class SolveReport:
    """What the solver policy did: final status, solver, wall time, and every attempt's outcome."""

    status: str
    solver: str
    seconds: float
    attempts: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def solve(problem: cp.Problem, solver: str | None = None, first_order: bool = False, **options) -> SolveReport:
    """Solve ``problem`` with ppgm's policy and say what happened.

    With ``solver=None``: Clarabel; if it does not reach "optimal" (it can stall when the feasible
    set is thin, e.g. gamma just above s~), Clarabel once more with shorter steps
    (``max_step_fraction=0.8``) and more iterations; then SCS. With ``first_order=True`` (large
    PSD cones, where an interior point is slow) SCS comes first, at ``eps = 1e-6``, then the two
    Clarabel attempts. Every returned point is checked against its tolerances by the caller
    (:class:`ConvexProgram`), whichever solver produced it. Any status other than "optimal" is
    reported in ``notes`` (an "optimal_inaccurate" answer is returned, never hidden). With an
    explicit ``solver`` only that solver runs. A certificate of infeasibility (or unboundedness) is
    returned as the report's status, for the caller to explain; ``RuntimeError`` when no attempt
    produced a solution or a certificate.

    Examples
    --------
    >>> x = cp.Variable()
    >>> solve(cp.Problem(cp.Minimize(cp.square(x - 1)))).status
    'optimal'
    """
    if solver is not None:
        plan = [(solver, dict(options))]
    else:
        plan = [
            ("CLARABEL", dict(options)),
            ("CLARABEL", dict(options, max_step_fraction=0.8, max_iter=500)),
            ("SCS", dict(eps=1e-7, max_iters=50_000)),
        ]
        if first_order:
            plan = [("SCS", dict(eps=1e-6, max_iters=50_000))] + plan[:2]
    attempts, start = [], time.perf_counter()
    best = None
    for name, opts in plan:
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():  # inaccuracy is reported in the notes instead
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                problem.solve(solver=name, **opts)
            status = problem.status
        except cp.error.SolverError as exc:  # the solver gave up without a point
            status = f"solver_error: {exc}"
        attempts.append((name, opts, status, time.perf_counter() - t0))
        if status in OPTIMAL:
            best = (name, status)
            break
        if status == "optimal_inaccurate" and best is None:
            best = (name, status)
        if status in ("infeasible", "unbounded"):
            break
    report = SolveReport(status="", solver="", seconds=time.perf_counter() - start, attempts=attempts)
    if best is None and attempts[-1][2] in ("infeasible", "unbounded"):
        # a certificate, not a failure: the caller says what it means for its program
        report.status, report.solver = attempts[-1][2], attempts[-1][0]
        return report
    if best is None:
        raise RuntimeError(f"no solver reached a solution: {[(a[0], a[2]) for a in attempts]}")
    if best[1] == "optimal_inaccurate" and problem.status != "optimal_inaccurate":
        # a later attempt failed after an inaccurate one: re-run the inaccurate one to restore its point
        name = best[0]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            problem.solve(solver=name, **[o for n, o, *_ in attempts if n == name][0])
    report.status, report.solver = problem.status, best[0]
    if len(attempts) > 1:
        report.notes.append("solver attempts: " + ", ".join(f"{a[0]} -> {a[2]}" for a in attempts))
    if report.status != "optimal":
        report.notes.append(f"{report.solver} returned {report.status!r}: the solution is less accurate than requested")
    return report


class ConvexProgram:
    """Shared machinery of the Gaussian and discrete MER / INI programs.

    Subclasses set ``variables``, ``divergences`` (list of :class:`Divergence`), ``structure`` (the
    constraints that make the moments a consistent model), ``entropy`` (a concave cvxpy expression)
    and implement ``_finish(result)``; they may hold their divergences as vectors
    (``_divergence_vectors``) and compute their values at the solution (``_divergence_values``).

    INI and MER are two cvxpy problems on the same constraint expressions, each compiled once: MER's
    gamma is a ``Parameter``, so a gamma sweep or a refit re-uses its compilation (cvxpy's DPP). One
    problem for both (minimise a s - b entropy with Parameters a, b) was tried and measured: with
    b = 0 in INI the entropy's cone variables are left free and Clarabel returned s~ 50x too small on
    a 12-node binary cycle (then MER "infeasible" above it), so the two stay separate.
    """

    kind = ""
    #: solve with SCS first (see :func:`solve`); the Gaussian program sets it from its cones' cost
    first_order = False
    variables: tuple
    divergences: list
    structure: list
    entropy: Any
    _finish: Callable[["MERResult"], None]  # the program's moments and graph into the result

    def _setup(self, p: float) -> None:
        if not (0 < p <= 1):
            raise ValueError(f"p: expected an exponent in (0, 1], got {p!r}")
        self.p = float(p)
        self.weights = np.array([d.weight(self.p) for d in self.divergences])
        self.gamma = cp.Parameter(nonneg=True, name="gamma", value=0.0)
        self.s = cp.Variable(nonneg=True, name="s")
        self._vectors = self._divergence_vectors()
        self.tolerance_constraints = [expr <= self.gamma * self.weights[rows] for expr, rows in self._vectors]
        self._ini_constraints = [expr <= self.s * self.weights[rows] for expr, rows in self._vectors]
        self.mer_problem = cp.Problem(cp.Maximize(self.entropy), self.structure + self.tolerance_constraints)
        self.ini_problem = cp.Problem(cp.Minimize(self.s), self.structure + self._ini_constraints)
        self._s_tilde: float | None = None

    def _divergence_vectors(self) -> list:
        """(vector expression, row indices into ``divergences``) pairs covering every divergence
        once; by default one vector of the scalar expressions."""
        return [(cp.hstack([d.expr for d in self.divergences]), np.arange(len(self.divergences)))]

    def _divergence_values(self) -> np.ndarray:
        """The divergences at the current solution, in ``divergences`` order."""
        out = np.empty(len(self.divergences))
        for expr, rows in self._vectors:
            out[rows] = np.ravel(expr.value)
        return out

    # ----------------------------------------------------------------------------------------------
    def ini(self, solver: str | None = None, **options) -> "MERResult":
        """Solve INI: the smallest tolerance scale s~ for which the statistics admit a consistent model."""
        report = solve(self.ini_problem, solver, self.first_order, **options)
        if report.status in ("infeasible", "infeasible_inaccurate", "unbounded"):
            raise RuntimeError(f"INI reported {report.status}: the program is malformed (INI is feasible for any statistics)")
        # s~ is read from the returned point: the smallest s at which that point (a consistent model)
        # meets every tolerance, so the reported s~ is always attained, whatever the solver's accuracy
        s_solver = max(float(self.s.value), 0.0)  # type: ignore[arg-type]  # solved
        ratios = self._divergence_values() / self.weights
        s_tilde = float(np.max(ratios)) if np.all(np.isfinite(ratios)) else s_solver
        s_tilde = max(s_tilde, 0.0)
        self._s_tilde = s_tilde
        result = self._result("ini", s_tilde, s_tilde, report, self.ini_problem, self._ini_constraints)
        if abs(s_tilde - s_solver) > RESIDUAL_RTOL * max(s_tilde, 1e-12):
            result.notes.append(f"s~ = {s_tilde:.6g} read from the returned point ({report.solver}'s own s was {s_solver:.6g})")
        return result

    def feasibility_gamma(self, alpha: float = 0.05) -> float:
        """The smallest gamma at which the true model meets every tolerance with probability about
        ``1 - alpha``.

        Statistic i from N_i samples with k_i free parameters is off the truth by a KL divergence
        of asymptotically chi2(k_i) / (2 N_i); a Bonferroni bound over the m statistics gives
        gamma = max_i chi2_{1 - alpha / m}(k_i) / (2 N_i) / (k_i / N_i) ** p. MER uses it when the
        statistics are consistent (s~ = 0) and no gamma is given.

        Parameters
        ----------
        alpha : float
            Probability, in (0, 1), that some statistic's sampling error exceeds its tolerance.

        Returns
        -------
        float

        Examples
        --------
        >>> from ppgm.mer.gaussian import GaussianMER
        >>> from ppgm.mer.sample_sets import Moments
        >>> nodes = [Moments((v,), np.eye(1), 400) for v in "ab"]
        >>> prog = GaussianMER("ab", nodes, [Moments(("a", "b"), [[1, .6], [.6, 1]], 400)])
        >>> round(prog.feasibility_gamma(), 4)
        0.1477
        """
        if not (0 < alpha < 1):
            raise ValueError(f"alpha: expected a probability in (0, 1), got {alpha!r}")
        q = 1 - alpha / len(self.divergences)
        return float(max(stats.chi2.ppf(q, d.dof) / (2 * d.n) / d.weight(self.p) for d in self.divergences))

    def s_tilde(self, solver: str | None = None) -> float:
        if self._s_tilde is None:
            self.ini(solver)
        return float(self._s_tilde)  # type: ignore[arg-type]  # set by ini()

    def mer(
        self,
        gamma: float | None = None,
        gamma_ratio: float | None = None,
        solver: str | None = None,
        **options,
    ) -> "MERResult":
        """Solve MER at ``gamma`` (or ``gamma_ratio * s~``, or the default rule of :func:`choose_gamma`)."""
        s_tilde = self.s_tilde(solver)
        gamma, rule = choose_gamma(s_tilde, gamma, gamma_ratio, self.feasibility_gamma())
        self.gamma.value = gamma
        report = solve(self.mer_problem, solver, self.first_order, **options)
        if report.status in ("infeasible", "infeasible_inaccurate"):
            raise RuntimeError(f"MER reported {report.status} at gamma={gamma:.6g} although INI gave s~={s_tilde:.6g}")
        result = self._result("mer", gamma, s_tilde, report, self.mer_problem, self.tolerance_constraints)
        result.notes.insert(0, rule)
        return result

    def resolve(self, constraints: Sequence, gamma: float, solver: str | None = None, **options) -> "MERResult":
        """MER at ``gamma`` with ``constraints`` of your own added (cvxpy constraints on this
        program's variables, e.g. :meth:`GaussianMER.covariance` or :meth:`DiscreteMER.marginal`).

        The added constraints make a new cvxpy problem (compiled once for this call); the program's
        own problem is left as it was. Duals in the result are those of the tolerance constraints
        in the new problem.

        Parameters
        ----------
        constraints : sequence of cvxpy constraints
        gamma : float
            The tolerance scale (at least INI's s~).
        solver : str, optional
            As in :meth:`mer`.

        Returns
        -------
        MERResult
            ``problem`` is the new problem; ``notes`` say how many constraints were added.

        Raises
        ------
        TypeError
            An element of ``constraints`` is not a cvxpy constraint.
        ValueError
            A constraint uses variables of another program, or gamma is below s~.

        Examples
        --------
        >>> from ppgm.mer.gaussian import GaussianMER
        >>> from ppgm.mer.sample_sets import Moments
        >>> nodes = [Moments((v,), np.eye(1), 200) for v in "ab"]
        >>> prog = GaussianMER("ab", nodes, [Moments(("a", "b"), [[1, .6], [.6, 1]], 200)])
        >>> res = prog.resolve([prog.covariance("a", "b") <= 0.5], gamma=0.05)
        >>> round(float(res.covariance[0, 1]), 3)
        0.5
        """
        if isinstance(constraints, cp.constraints.constraint.Constraint) or not isinstance(constraints, (list, tuple)):
            raise TypeError("constraints: expected a list of cvxpy constraints")
        own = {v.id for v in self.mer_problem.variables()}
        for k, c in enumerate(constraints):
            if not isinstance(c, cp.constraints.constraint.Constraint):
                raise TypeError(f"constraints[{k}]: expected a cvxpy constraint, got {type(c).__name__}")
            foreign = [v.name() for v in c.variables() if v.id not in own]
            if foreign:
                raise ValueError(f"constraints[{k}]: uses variables that are not this program's: {foreign}")
        s_tilde = self.s_tilde(solver)
        gamma, rule = choose_gamma(s_tilde, gamma, None, self.feasibility_gamma())
        self.gamma.value = gamma
        problem = cp.Problem(self.mer_problem.objective, self.mer_problem.constraints + list(constraints))
        report = solve(problem, solver, self.first_order, **options)
        if report.status in ("infeasible", "infeasible_inaccurate"):
            raise RuntimeError(f"MER with the added constraints is {report.status} at gamma={gamma:.6g}: "
                               "no model meets both the tolerances and the constraints (try a larger gamma)")
        result = self._result("mer", gamma, s_tilde, report, problem, self.tolerance_constraints)
        result.notes.insert(0, rule)
        result.notes.append(f"{len(constraints)} constraint(s) of your own added to the program")
        return result

    # ----------------------------------------------------------------------------------------------
    def _result(self, program: str, gamma: float, s_tilde: float, report: SolveReport, problem, constraints) -> "MERResult":
        duals = np.full(len(self.divergences), np.nan)
        for (expr, rows), c in zip(self._vectors, constraints):
            if c.dual_value is not None:
                duals[rows] = np.ravel(c.dual_value)
        values = self._divergence_values()
        tol = gamma * self.weights
        active = values >= tol * (1 - ACTIVE_RTOL) - 1e-12
        table = [
            dict(scope=d.scope, kind=d.kind, n=d.n, dof=d.dof, tolerance=t, divergence=v, dual=y, active=bool(a))
            for d, t, v, y, a in zip(self.divergences, tol, values, duals, active)
        ]
        result = MERResult(
            kind=self.kind,
            program=program,
            variables=tuple(self.variables),
            gamma=gamma,
            s_tilde=s_tilde,
            p=self.p,
            constraints=table,
            status=report.status,
            solver=report.solver,
            solve_seconds=report.seconds,
            problem=problem,
            notes=list(report.notes),
        )
        # the solver's own status is not the last word: check the point it returned
        excess = (values - tol) / np.maximum(tol, 1e-9)
        worst = float(np.max(excess, initial=0.0))
        if not np.all(np.isfinite(values)) or worst > RESIDUAL_RTOL:
            bad = int(np.sum(excess > RESIDUAL_RTOL)) if np.all(np.isfinite(values)) else len(values)
            result.notes.append(f"the solution exceeds {bad} tolerance constraint(s), by up to {worst:.2g} of the "
                                "tolerance: read it as inaccurate")
            if result.status == "optimal":
                result.status = "optimal_inaccurate"
        self._finish(result)
        return result


def choose_gamma(s_tilde: float, gamma: float | None, gamma_ratio: float | None,
                 consistent_gamma: float | None = None) -> tuple[float, str]:
    """The gamma MER uses, and a sentence saying where it came from.

    ``gamma`` wins; else ``gamma_ratio * s~``; else the default rule: ``DEFAULT_GAMMA_RATIO * s~``.
    The ratio 10 was checked on tuning seeds that ``benchmarks/RESULTS.md`` does not report (three
    families of Gaussian models seen through overlapping sample sets): its mean edge F1 was within
    0.01 of the best fixed ratio in 2 to 20, and at or above the chi-square rule of
    :meth:`ConvexProgram.feasibility_gamma` (4-9 s~ there); choosing gamma by the held-out
    likelihood of whole sample sets picked the smallest gamma every time (the tightest fit
    predicts best) and was not kept. When the statistics are consistent (s~ = 0, e.g. every set
    observed every variable) a ratio means nothing, and ``consistent_gamma`` (the chi-square rule)
    is used. Raises ``ValueError`` when the request is infeasible (gamma < s~).

    Parameters
    ----------
    s_tilde : float
        INI's optimum.
    gamma, gamma_ratio : float or None
        An explicit gamma, or a ratio to s~.
    consistent_gamma : float, optional
        The gamma for consistent statistics (required when s~ = 0 and neither is given).

    Returns
    -------
    (float, str)

    Examples
    --------
    >>> choose_gamma(0.5, None, 2.0)[0], choose_gamma(0.5, None, None)[0]
    (1.0, 5.0)
    """
    if gamma is not None and gamma_ratio is not None:
        raise ValueError(f"gamma, gamma_ratio: give one of them, not both (got gamma={gamma!r}, gamma_ratio={gamma_ratio!r})")
    if gamma is not None:
        if not np.isfinite(gamma) or gamma < 0:
            raise ValueError(f"gamma: expected a non-negative number, got {gamma!r}")
        if gamma < s_tilde * (1 - 1e-9):
            raise ValueError(
                f"gamma: {gamma:.6g} is below INI's optimum s~ = {s_tilde:.6g}, so MER is infeasible; "
                f"use gamma > s~ (or gamma_ratio > 1)"
            )
        return float(gamma), f"gamma = {gamma:.6g} as given (s~ = {s_tilde:.6g}, ratio {gamma / s_tilde if s_tilde else np.inf:.3g})"
    if gamma_ratio is not None:
        if not np.isfinite(gamma_ratio) or gamma_ratio < 1:
            raise ValueError(f"gamma_ratio: expected a ratio >= 1 to INI's optimum s~, got {gamma_ratio!r}")
        if s_tilde == 0:
            raise ValueError("gamma_ratio: INI's optimum s~ is 0 (consistent statistics); give gamma instead")
        return float(gamma_ratio * s_tilde), f"gamma = {gamma_ratio:g} x s~ = {gamma_ratio * s_tilde:.6g}"
    if s_tilde > 1e-6:  # below this, solver noise around a consistent set of statistics
        g = DEFAULT_GAMMA_RATIO * s_tilde
        return g, f"gamma = {DEFAULT_GAMMA_RATIO:g} x s~ = {g:.6g} (default rule)"
    if consistent_gamma is None:
        raise ValueError("consistent_gamma: INI's optimum s~ is 0, so the default ratio rule has nothing to scale; "
                         "give gamma, or the gamma for consistent statistics")
    g = max(float(consistent_gamma), s_tilde)
    return g, (f"gamma = {g:.6g}: statistics consistent (s~ = 0), chi-square rule (default): the true model "
               "meets every tolerance with probability about 0.95")


@dataclass
class MERResult:
    """What MER or INI found.

    Attributes
    ----------
    kind : {"gaussian", "discrete"}
    program : {"mer", "ini"}
    gamma, s_tilde, p : float
        The tolerance scale used (s~ itself for INI), INI's optimum, the exponent p.
    constraints : list of dict
        One row per statistic: scope, kind (node / edge), n, dof, tolerance, divergence at the
        solution, dual value, active; discrete edge rows add ``interaction`` (largest absolute entry of the
        doubly centred edge log-potential, nats) and ``z`` (that over its standard error at the
        edge's n, see :func:`ppgm.mer.discrete.interaction_se`).
    graph : networkx.Graph
        Edges read from the fitted parameters (partial correlations, or the pairwise interaction of
        the log-potentials) above ``graph_tol``; nodes are the variables.
    entropy : float
        Entropy of the fitted model (nats; differential entropy for Gaussians).
    status, solver, solve_seconds, problem, notes
        The solver's final status and name, the wall time of the solve, the cvxpy ``Problem`` (change
        it and call ``problem.solve`` again), and remarks (gamma rule, solver fallbacks, inaccuracy).
    covariance, precision, means : numpy arrays / dict (Gaussian)
    marginals, log_potentials : dict (discrete)
        Fitted clique marginals of the junction tree; node and edge log-potentials of the
        equivalent pairwise model (from the dual values).

    Parameters
    ----------
    The fields listed under Attributes (filled by the programs' ``ini`` / ``mer``).

    Examples
    --------
    >>> from ppgm.mer.gaussian import GaussianMER
    >>> from ppgm.mer.sample_sets import Moments
    >>> nodes = [Moments((v,), np.eye(1), 200) for v in "ab"]
    >>> res = GaussianMER("ab", nodes, [Moments(("a", "b"), [[1, .6], [.6, 1]], 200)]).mer(gamma=0.05)
    >>> res.program, res.edges(), round(float(res.covariance[0, 1]), 2)
    ('mer', [('a', 'b')], 0.67)
    """

    kind: str
    program: str
    variables: tuple
    gamma: float
    s_tilde: float
    p: float
    constraints: list
    status: str
    solver: str
    solve_seconds: float
    problem: Any
    notes: list
    graph: nx.Graph = None
    graph_tol: float = 0.0
    entropy: float = float("nan")
    covariance: np.ndarray | None = None
    precision: np.ndarray | None = None
    means: dict | None = None
    marginals: dict | None = None
    log_potentials: dict | None = None

    @property
    def active(self) -> list[tuple]:
        """Scopes of the constraints met with equality."""
        return [c["scope"] for c in self.constraints if c["active"]]

    @property
    def active_edges(self) -> list[tuple]:
        return [c["scope"] for c in self.constraints if c["active"] and c["kind"] == "edge"]

    def edges(self) -> list[tuple]:
        """Edges of ``graph`` as sorted pairs in variable order.

        Returns
        -------
        list of tuple

        Examples
        --------
        >>> from ppgm.mer.gaussian import GaussianMER
        >>> from ppgm.mer.sample_sets import Moments
        >>> nodes = [Moments((v,), np.eye(1), 200) for v in "ab"]
        >>> GaussianMER("ab", nodes, [Moments(("a", "b"), [[1, .6], [.6, 1]], 200)]).mer(gamma=0.05).edges()
        [('a', 'b')]
        """
        pos = {v: i for i, v in enumerate(self.variables)}
        return sorted(tuple(sorted(e, key=pos.__getitem__)) for e in self.graph.edges)

    def summary(self) -> str:
        """One line: the program, gamma and s~, entropy, edges, solver status and time.

        Returns
        -------
        str

        Examples
        --------
        >>> from ppgm.mer.gaussian import GaussianMER
        >>> from ppgm.mer.sample_sets import Moments
        >>> nodes = [Moments((v,), np.eye(1), 200) for v in "ab"]
        >>> GaussianMER("ab", nodes, [Moments(("a", "b"), [[1, .6], [.6, 1]], 200)]).ini().summary().startswith("INI (gaussian)")
        True
        """
        return (
            f"{self.program.upper()} ({self.kind}): gamma={self.gamma:.4g} (s~={self.s_tilde:.4g}), "
            f"entropy={self.entropy:.4f}, {len(self.active)} active constraints, "
            f"{self.graph.number_of_edges()} edges, {self.solver} {self.status} in {self.solve_seconds:.2f}s"
        )


def precision_recall(found: Sequence[tuple], truth: Sequence[tuple]) -> tuple[float, float]:
    """Precision and recall of an edge set against the true one (edges as unordered pairs).

    Examples
    --------
    >>> precision_recall([("a", "b"), ("b", "c")], [("b", "a")])
    (0.5, 1.0)
    """
    f = {frozenset(e) for e in found}
    t = {frozenset(e) for e in truth}
    hit = len(f & t)
    return (hit / len(f) if f else 1.0), (hit / len(t) if t else 1.0)
