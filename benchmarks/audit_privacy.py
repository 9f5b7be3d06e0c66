"""Statistical audit of every private path: each mechanism run many times on two neighbouring inputs
chosen to be hard, and a lower confidence bound on the epsilon its outputs imply
(``ppgm.privacy.audit``), beside the epsilon it claims; and each mechanism's broken twin (noise scale
halved, a sensitivity miscounted, a bound skipped), which the audit must catch.

The scenarios (shared with tests/test_audit.py, which runs them at fewer runs):

  laplace sampler     LaplaceMechanism(1).measure on one cell, counts 11 and 10 (sensitivity 1)
  gaussian sampler    GaussianMechanism(rho=0.5).measure on one cell (sigma 1), tested at delta 0.2
  release_tables      a person with 8 records in one cell, at most 4 kept (max_contributions=4),
                      one table, Laplace epsilon 1; and its noisy N (publish_n=Laplace epsilon 1)
  MST selection       mst_select on three binary variables, 100 records plus one that lowers the
                      best pair's L1 error and raises the two others', rho 1 over two rounds, tested
                      at delta 0.2
  AIM selection       AIM's scores and report-noisy-max (epsilon 1, one round's choice) over two
                      candidates, one raised and one lowered by the record
  MaxEnt aggregates   aggregate(mechanism=Laplace epsilon 1) end to end (the test suite also runs
                      noisy_aggregates, its engine step): one feature, the record with label 1
                      (its count and its label sum both move)
  private quantiles   one low quantile (alpha 0.1) over 11 candidates, epsilon 2, 10 values plus one
                      at the lower bound

Broken twins (monkeypatched, the library untouched): noise drawn at half the scale computed; the
contribution bound k left out of the scale; the bound not enforced; report-noisy-max's Gumbel noise
at half its scale; the label sums left out of the aggregates' sensitivity; a quantile at four times
its budget. They run on the seeded path: they check the audit's power, not the sampler.

Events fixed before the runs: thresholds on each released cell (and their intersection), the choice
made, the count published. Confidence 1 - 1e-6: a mechanism that keeps its claim fails with
probability at most 1e-6.

Run: python benchmarks/audit_privacy.py [--quick]   (about 15 minutes; --quick about 2)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from unittest import mock

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))

from ppgm.adapters import aggregate, release_tables  # noqa: E402
from ppgm.factors.domain import Domain  # noqa: E402
from ppgm.factors.factor import Factor  # noqa: E402
from ppgm.inference.tables import contingency_tables  # noqa: E402
from ppgm.learners import aggregates as agg_engine  # noqa: E402
from ppgm.models.measurement import Measurement  # noqa: E402
from ppgm.privacy import audit as harness  # noqa: E402
from ppgm.privacy import mechanisms  # noqa: E402
from ppgm.privacy import private_quantiles as pq  # noqa: E402
from ppgm.privacy.mechanisms import GaussianMechanism, LaplaceMechanism, NotPrivateWarning, zcdp_epsilon  # noqa: E402
from ppgm.synthesis import aim, selection  # noqa: E402

import ppgm.adapters.private as private_adapter  # noqa: E402


@dataclass
class Claim:
    """One claim tested on a scenario's outputs: its events and the epsilon (at delta) claimed."""

    label: str
    events: Callable[[np.ndarray], np.ndarray]
    claimed: float
    delta: float = 0.0


@dataclass
class Scenario:
    """A private function on two neighbouring inputs: ``sample(which, runs, rng)`` gives ``runs``
    outputs on D (which 0) or D' (which 1); ``claims`` the events and epsilons tested on them;
    ``breaks`` the broken twins (context managers that monkeypatch the library)."""

    name: str
    sample: Callable
    claims: list
    breaks: dict = field(default_factory=dict)
    batch: int | None = None


def run(scenario: Scenario, runs: int, seeded: bool = False, seed: int | None = None, alpha: float = harness.ALPHA) -> list:
    """Every claim of ``scenario`` audited on one set of ``runs`` outputs per data set."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)
        t0 = time.perf_counter()
        out, seed = harness.collect(scenario.sample, runs, seeded=seeded, seed=seed, batch=scenario.batch)
        seconds = time.perf_counter() - t0
    return [harness.audit_outputs(out[0], out[1], c.events, c.claimed, delta=c.delta, alpha=alpha,
                                  name=f"{scenario.name}: {c.label}" if c.label else scenario.name,
                                  seconds=seconds, seed=seed) for c in scenario.claims]


# --- mutations (the broken twins) -----------------------------------------------------------------


@contextlib.contextmanager
def noise_halved():
    """Every table's noise drawn at half the scale the mechanism computed (both samplers, both paths)."""
    original = mechanisms.add_noise
    with mock.patch.object(mechanisms, "add_noise", lambda v, kind, scale, rng=None: original(v, kind, scale / 2, rng)):
        yield


@contextlib.contextmanager
def contribution_miscounted():
    """release_tables forgets the contribution bound k in the sensitivity (scale computed for 1 record)."""
    original = private_adapter._bounded_records

    def wrong(*args):
        keep, w, _ = original(*args)
        return keep, w, 1.0

    with mock.patch.object(private_adapter, "_bounded_records", wrong):
        yield


@contextlib.contextmanager
def bound_skipped():
    """release_tables keeps every record of every person (max_contributions not enforced)."""
    with mock.patch.object(private_adapter, "keep_at_most", lambda ids, k, rng: np.ones(len(ids), dtype=bool)):
        yield


@contextlib.contextmanager
def gumbel_halved():
    """report-noisy-max with Gumbel noise at half its scale (the sensitivity halved)."""
    original = selection.gumbel_scale
    with mock.patch.object(selection, "gumbel_scale", lambda rho, sensitivity=1.0: original(rho, sensitivity) / 2):
        yield


@contextlib.contextmanager
def label_sums_uncounted():
    """noisy_aggregates' sensitivity counts the count tables only, not the label sums (half of 2K)."""
    original = LaplaceMechanism.scale

    def wrong(self, n_tables, contribution=1.0, multiplicity=None):
        return original(self, n_tables, contribution, multiplicity) / 2  # K tables counted, not 2K

    with mock.patch.object(LaplaceMechanism, "scale", wrong):
        yield


@contextlib.contextmanager
def quantile_split_forgotten():
    """private_quantiles spend four times the epsilon they are given (a column's budget for four
    quantile levels spent on each: the split over the levels forgotten), on both paths."""
    original = pq.private_quantiles

    def wrong(values, bounds, alphas, epsilon, rng=None, n_candidates=1000):
        return original(values, bounds, alphas, 4 * epsilon, rng=rng, n_candidates=n_candidates)

    with mock.patch.object(pq, "private_quantiles", wrong):
        yield


# --- scenarios ------------------------------------------------------------------------------------


def laplace_sampler(epsilon: float = 1.0) -> Scenario:
    """One cell, counts 11 (D) and 10 (D'), through LaplaceMechanism(epsilon).measure: each run is a
    cell of one long vector, one call to the sampler for all runs."""
    mech = LaplaceMechanism(epsilon)

    def sample(which, runs, rng):
        return mech.measure([Factor(("x",), np.full(runs, 11 - which, dtype=np.int64))], rng)[0].values[:, None]

    events = lambda y: harness.threshold_events(y, [np.arange(8, 15)])  # noqa: E731
    return Scenario("discrete Laplace sampler", sample, [Claim("", events, epsilon)], {"noise halved": noise_halved})


def gaussian_sampler(rho: float = 0.5, delta: float = 0.2) -> Scenario:
    """One cell, counts 11 and 10, through GaussianMechanism(rho).measure (sigma = 1 / sqrt(2 rho));
    the zCDP claim tested at (zcdp_epsilon(rho, delta), delta): delta 0.2 is where halving sigma
    shows most above the claim at a few thousand runs."""
    mech = GaussianMechanism(rho=rho)

    def sample(which, runs, rng):
        return mech.measure([Factor(("x",), np.full(runs, 11 - which, dtype=np.int64))], rng)[0].values[:, None]

    events = lambda y: harness.threshold_events(y, [np.arange(7, 16)])  # noqa: E731
    return Scenario("discrete Gaussian sampler", sample, [Claim("", events, zcdp_epsilon(rho, delta), delta)],
                    {"noise halved": noise_halved})


def _people(k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """D': 30 people with one record each over A (3 states) and B (2); D: plus a person with 2 k
    records, all in the cell (A=0, B=0) (more than the bound k: k of them are kept)."""
    rng = np.random.default_rng(0)  # the data is fixed; only the mechanism's noise is random
    base = pd.DataFrame({"A": rng.integers(0, 3, 30), "B": rng.integers(0, 2, 30), "who": np.arange(30)})
    person = pd.DataFrame({"A": [0] * (2 * k), "B": [0] * (2 * k), "who": [999] * (2 * k)})
    return pd.concat([base, person], ignore_index=True), base


def tables_release(k: int = 4, epsilon: float = 1.0, epsilon_n: float = 1.0) -> Scenario:
    """release_tables end to end: one table (A, B), max_contributions=k, Laplace epsilon, and N
    published through Laplace epsilon_n. Outputs: the cell (0, 0) and N."""
    d, d2 = _people(k)
    states = {"A": [0, 1, 2], "B": [0, 1]}
    c0 = int(((d2.A == 0) & (d2.B == 0)).sum())
    n0 = len(d2)

    def sample(which, runs, rng):
        data = (d, d2)[which]
        out = np.empty((runs, 2))
        for i in range(runs):
            seed = None if rng is None else int(rng.integers(1 << 62))
            rel = release_tables(data, [("A", "B")], LaplaceMechanism(epsilon), state_names=states, individuals="who",
                                 max_contributions=k, publish_n=LaplaceMechanism(epsilon_n), seed=seed)
            out[i] = next(iter(rel)).values[0, 0], rel.n
        return out

    ts = np.arange(-1, k + 4)
    return Scenario("release_tables, a person at the bound", sample, [
        Claim("tables", lambda y: harness.threshold_events(y[:, :1], [c0 + ts]), epsilon),
        Claim("noisy N", lambda y: harness.threshold_events(y[:, 1:], [n0 + ts]), epsilon_n),
    ], {"contribution miscounted": contribution_miscounted, "bound skipped": bound_skipped})


def _mst_data() -> tuple[np.ndarray, np.ndarray]:
    """D': 100 records over three binary variables (cells 000 .. 111: 15, 10, 12, 24, 6, 15, 7, 11);
    D: plus the record (0, 0, 0). Under the independent model of D's one-way tables the pairs' L1
    errors are AB 12.24, AC 10.4, BC 10.4, and the record lowers AB's by 1 and raises AC's and
    BC's by 1 (found by a search over random tables for the largest gap between the broken
    twin's bound and the claim)."""
    counts = (15, 10, 12, 24, 6, 15, 7, 11)
    cells = [(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)]
    d2 = np.array([c for c, m in zip(cells, counts) for _ in range(m)])
    return np.vstack([d2, [[0, 0, 0]]]), d2


def mst_selection(rho: float = 1.0, delta: float = 0.2) -> Scenario:
    """mst_select's two rounds on the exact pair tables of D and D', the released one-way tables
    fixed at D''s exact counts (the selection is audited given them). The zCDP claim rho (two
    exponential mechanisms at rho / 2 each, pure epsilon 2 a round) is tested at
    (zcdp_epsilon(rho, delta), delta). Outputs: 3 x first pick + second pick (AB 0, AC 1, BC 2)."""
    dom = Domain(("A", "B", "C"), (2, 2, 2))
    pairs = [("A", "B"), ("A", "C"), ("B", "C")]
    d, d2 = _mst_data()
    tables = [contingency_tables(x, dom, pairs) for x in (d, d2)]
    ones = [Measurement((v,), t.values.astype(float), "gaussian", 1.0)
            for v, t in zip(dom.variables, contingency_tables(d2, dom, [("A",), ("B",), ("C",)]))]

    def sample(which, runs, rng):
        out = np.empty((runs, 1), dtype=np.int64)
        for i in range(runs):
            picks = [pairs.index(s.clique) for s in selection.mst_select(dom, tables[which], ones, rho, rng=rng)]
            out[i] = 3 * picks[0] + picks[1]
        return out

    def events(y):
        seq = harness.choice_events(y[:, 0], 9)
        trees = np.stack([seq[:, [1, 3]].any(1), seq[:, [2, 6]].any(1), seq[:, [5, 7]].any(1)], axis=1)  # {AB,AC} {AB,BC} {AC,BC}
        return np.concatenate([seq, trees, ~trees], axis=1)

    return Scenario("MST selection (two rounds)", sample, [Claim("", events, zcdp_epsilon(rho, delta), delta)],
                    {"Gumbel scale halved": gumbel_halved})


def aim_selection(epsilon: float = 1.0) -> Scenario:
    """One AIM round's choice as aim_select makes it: aim_scores of the candidates' exact counts
    against the model's marginals (fixed: released), then report_noisy_max at rho = epsilon^2 / 8
    with sensitivity max w_r. Candidates ("A",) and ("B",), weights 1, n 100, sigma 1, the model's
    marginals [0.5, 0.5] and [0.485, 0.515]; D' has A [50, 50] and B [47, 53], D adds (0, 0): A's
    score rises by 1 (from 0), B's falls by 1 (from 3), 1.5 Gumbel scales apart (the gap where the
    broken twin shows most). Output: the index chosen."""
    base = np.array([[0, 0]] * 25 + [[0, 1]] * 25 + [[1, 0]] * 22 + [[1, 1]] * 28)
    dom = Domain(("A", "B"), (2, 2))
    data = (np.vstack([base, [[0, 0]]]), base)
    counts = [[t.values for t in contingency_tables(x, dom, [("A",), ("B",)])] for x in data]
    mu = [np.array([0.5, 0.5]), np.array([0.485, 0.515])]
    weights = [1.0, 1.0]

    def sample(which, runs, rng):
        out = np.empty((runs, 1), dtype=np.int64)
        for i in range(runs):
            scores = aim.aim_scores(counts[which], mu, 100.0, weights, 1.0)
            out[i] = aim.report_noisy_max(scores, epsilon**2 / 8, max(weights), rng)
        return out

    return Scenario("AIM selection (one round)", sample, [Claim("", lambda y: harness.choice_events(y[:, 0], 2), epsilon)],
                    {"Gumbel scale halved": gumbel_halved})


def _labelled() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D': 30 records, feature A in {a, b, c} and a 0-1 label; D: plus (a, 1)."""
    d2 = pd.DataFrame({"A": ["a", "b", "c"] * 10, "y": [0, 1] * 15})
    return pd.concat([d2, pd.DataFrame({"A": ["a"], "y": [1]})], ignore_index=True), d2


def maxent_aggregates(epsilon: float = 1.0, end_to_end: bool = False) -> Scenario:
    """The noisy counts and label sums behind MaxEnt: one feature (K = 1 table, 2K = 2 noised
    vectors, Laplace scale 2 / epsilon). ``end_to_end``: aggregate(df, mechanism=...) on the
    DataFrames; otherwise noisy_aggregates (the engine step aggregate ends with) on their exact
    tables. Outputs: the count and the label sum of the record's cell."""
    frames = _labelled()
    cats = {"A": ["a", "b", "c"]}
    exact = [aggregate(f, features=["A"], label="y", pairs="none", categories=cats, positive=1).tables for f in frames]
    c0, s0 = float(exact[1][0].values[0]), float(exact[1][0].label_sums[0])

    def sample(which, runs, rng):
        out = np.empty((runs, 2))
        for i in range(runs):
            if end_to_end:
                seed = None if rng is None else int(rng.integers(1 << 62))
                t = aggregate(frames[which], features=["A"], label="y", pairs="none", mechanism=LaplaceMechanism(epsilon),
                              categories=cats, positive=1, seed=seed).tables[0]
            else:
                t = agg_engine.noisy_aggregates(exact[which], LaplaceMechanism(epsilon), rng)[0]
            out[i] = t.values[0], t.label_sums[0]
        return out

    ts = np.arange(-1, 4)
    name = "aggregate (MaxEnt), end to end" if end_to_end else "noisy aggregates (MaxEnt)"
    return Scenario(name, sample, [Claim("", lambda y: harness.threshold_events(y, [c0 + ts, s0 + ts]), epsilon)],
                    {"label sums uncounted": label_sums_uncounted})


def quantiles(epsilon: float = 2.0, alpha: float = 0.1) -> Scenario:
    """private_quantiles of one low quantile (alpha 0.1) over 11 candidates on [0, 10]: D' has 10
    values spread over [2, 8], D adds one at 0 (every candidate above 0 sees its count and the target
    move, so the scores below and above the quantile move apart). Output: the quantile."""
    d2 = np.linspace(2.0, 8.0, 10)
    data = (np.r_[d2, 0.0], d2)

    def sample(which, runs, rng):
        out = np.empty((runs, 1))
        for i in range(runs):
            out[i] = pq.private_quantiles(data[which], (0.0, 10.0), [alpha], epsilon, rng=rng, n_candidates=11)[0]
        return out

    events = lambda y: np.concatenate([y <= c for c in np.arange(0.0, 10.0)] + [y >= c for c in np.arange(1.0, 11.0)], axis=1)  # noqa: E731
    return Scenario("private quantiles", sample, [Claim("", events, epsilon)], {"split forgotten": quantile_split_forgotten})


def private_bins(rho: float = 0.5, delta: float = 0.2) -> Scenario:
    """A numeric column's private bins, through the release's own path (``_private_bins``: the fine
    histogram released by GaussianMechanism(rho), then the bins read from it): an integer column on
    [0, 9], D' two records at every value, D one more at 0. Output: the noisy count of the cell at 0
    and the first bin edge chosen (post-processing of the same histogram). The zCDP claim tested at
    (zcdp_epsilon(rho, delta), delta), as the Gaussian sampler's."""
    from ppgm.adapters.private import read_release

    base = pd.DataFrame({"x": np.repeat(np.arange(10), 2)})
    frames = (pd.concat([base, pd.DataFrame({"x": [0]})], ignore_index=True), base)
    spec = {"x": {"min": 0, "max": 9, "integer": True}}
    reads = [read_release(f, [("x",)], spec) for f in frames]
    mech = GaussianMechanism(rho=rho)

    def sample(which, runs, rng):
        r = reads[which]
        out = np.empty((runs, 2))
        for i in range(runs):
            schema, noisy = private_adapter._private_bins(r.schema, r, r.known(), None, 1.0, mech, rng)
            out[i] = noisy[0].values[0], schema.bins["x"].edges[1]
        return out

    def events(y):
        return np.concatenate([harness.threshold_events(y[:, :1], [np.arange(-1.0, 8.0)]),
                               harness.threshold_events(y[:, 1:], [np.arange(1.0, 10.0)])], axis=1)

    return Scenario("private bins of a numeric column", sample, [Claim("", events, zcdp_epsilon(rho, delta), delta)],
                    {"noise halved": noise_halved})


#: The long form: per scenario, runs per data set on the private path and for each broken twin
#: (seeded: the mutations are checked for the audit's power, not for the sampler).
LONG = {
    "laplace": (laplace_sampler, 100_000, 20_000),
    "gaussian": (gaussian_sampler, 100_000, 20_000),
    "tables": (tables_release, 1_500, 1_500),
    "mst": (mst_selection, 3_000, 20_000),
    "aim": (aim_selection, 10_000, 20_000),
    "aggregates": (lambda: maxent_aggregates(end_to_end=True), 1_500, 2_000),
    "quantiles": (quantiles, 400, 5_000),
    "bins": (private_bins, 20_000, 20_000),
}


def main(quick: bool) -> None:
    from _results import machine, write_section

    rows = []
    scale = 10 if quick else 1
    for key, (make, runs, broken_runs) in LONG.items():
        sc = make()
        results = run(sc, max(runs // scale, 200))
        twins = {}
        for label, brk in sc.breaks.items():
            with brk():
                twins[label] = run(sc, max(broken_runs // scale, 200), seeded=True)
        for i, r in enumerate(results):
            twin = "; ".join(f"{label}: {tw[i].epsilon_lb:.3f} ({tw[i].runs:,} seeded runs)" for label, tw in twins.items())
            rows.append(f"| {r.name} | {'private' if r.private else 'seeded'} | {r.runs:,} | {r.claimed:.3f}"
                        f"{f' (delta {r.delta:g})' if r.delta else ''} | {r.epsilon_lb:.3f} | {'yes' if r.passed else 'NO'} | {twin} | "
                        f"{r.seconds:.1f} |")
            print(rows[-1], flush=True)
    text = ("## Privacy audit (benchmarks/audit_privacy.py)\n\n"
            f"{machine()}. Each mechanism run on two neighbouring inputs (runs per data set); the audited epsilon is a "
            "one-sided lower confidence bound at 1 - 1e-6 (Clopper-Pearson, Bonferroni over the events fixed in advance "
            "and both directions); a claim holds while it stays at or below the claimed epsilon. The broken twins "
            "(monkeypatched) must exceed it.\n\n"
            "| mechanism | path | runs | claimed epsilon | audited lower bound | holds | broken twins' bounds | seconds |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")
    if not quick:
        write_section("audit_privacy", text)
    print(text)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a tenth of the runs; RESULTS.md untouched")
    main(ap.parse_args().quick)
