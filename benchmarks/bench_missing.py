"""Records with missing values and Markov networks from records, against pgmpy and pyAgrum.

Sections (each row: KL(true || learned) in nats, exact, and wall time in seconds):
  bn      ALARM (37 nodes), N records sampled from the network, a fraction of the cells removed
          completely at random (MCAR) or by a MAR rule (the first five nodes in topological order are
          always seen; every other cell goes missing 1.6x as often when the row's first node is in its
          first state, 0.4x otherwise, scaled to the stated rate). Complete-case: pgmpy's
          DiscreteBayesianEstimator (Dirichlet pseudo-count 1 per cell, the same prior as ppgm's EM) on
          the rows with no missing cell, which is also what pgmpy's DiscreteEM reduces to here (it drops
          every row with a missing cell in an observed column); ppgm: MissingValuesEM (pseudo-count 1).
  networks  Larger junction trees: pgmpy's bundled INSURANCE (27 nodes, tree of 46,872 cells), HAILFINDER
          (56 nodes, 9,544) and WIN95PTS (76 nodes, 2,684) at N = 2,000 / 20,000 / 200,000, 10% and 30% of
          the cells MCAR and the MAR rule above at 30%: complete-case (as above), pyAgrum's BNLearner EM
          (same structure, same holes, smoothing prior 1 = the same Dirichlet pseudo-count as ppgm; stopped
          when the log-likelihood changes by less than 1e-8 of ppgm's final one, ppgm's own rule (tol = 1e-8 on
          the relative change), at most 200 iterations as ppgm and ``--peer-max-time`` seconds (a row it
          leaves at the time cap says so, its speed-up then a lower bound); its random CPT noise seeded) and
          MissingValuesEM, all in this process. pyAgrum is optional (``pip install pyagrum``, never a
          dependency of ppgm); ``--peer-max-n`` and ``--peer-cells`` say which rows run it (it takes
          minutes per row where ppgm takes seconds). ppgm's time is the median of ``--repeats`` runs when
          a run is under 30 s, one run otherwise; pyAgrum's is one run. The 1-minute load average before
          each row says how contended the shared machine was (2 cores).
  latent  A latent-variable case both EMs run: Asia with the node "either" never observed, N = 10,000:
          pgmpy's DiscreteEM (its defaults, 100 iterations at most; maximum-likelihood M-step) against
          MissingValuesEM with pseudo_count=0 (the same objective; each from its own seeded start); KL
          over the seven observed nodes' joint (label switching of the latent does not count), by
          enumeration.
  mnmiss  Markov networks with missing cells: the same two networks, N records, 10-50% of cells missing
          (MCAR, and the MAR rule above with the networks' first five variables always seen), complete-case
          (MarkovNetworkEstimator on the complete rows) against MarkovNetworkEstimator's EM on every row.
  mn      Markov networks from complete records: the CGM paper's third-order chain (8 x 6 states) and a
          4 x 4 grid of 3-state variables, N = 100,000: ppgm's MarkovNetworkEstimator (maximum likelihood,
          pseudo-count 1 record) against pgmpy's MirrorDescentEstimator on the same cliques at 100 (its
          default), 1,000 and 5,000 iterations (it has no stopping rule of its own).
          pgmpy orders variables through sets, so its result follows Python's hash seed (the
          chain's KL read 5.83 in one run and 6.12 in another; it stalls in both); ppgm's does not.
          Why it stalls (pgmpy 1.1.2): its step reads the marginals off
          ``belief_propagation.junction_tree.clique_beliefs`` after ``calibrate()``, but
          BeliefPropagation keeps the calibrated beliefs on itself and leaves the tree's factors as the
          potentials, so the loss compares the potentials with the data's marginals; with more than one
          clique it converges to potentials equal to marginals, a model that counts every separator's
          marginal once per clique holding it. Its fitted theta and its returned tree give the same KL
          (checked on a 5-node chain: 0.6687 at 100 iterations, 0.6656 at 300 and 1,000).

  python benchmarks/bench_missing.py [--quick] [--sections bn networks latent mn mnmiss] [--million]
      [--networks insurance hailfinder win95pts] [--sizes 2000 20000 200000] [--settings 10:MCAR 30:MCAR 30:MAR]
      [--peer-max-n 20000] [--peer-cells insurance:20000:10:MCAR ...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _results import machine, write_section  # noqa: E402

warnings.filterwarnings("ignore")

import ppgm.adapters as pa  # noqa: E402
from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork  # noqa: E402
from pgmpy.factors.discrete import DiscreteFactor  # noqa: E402
from pgmpy.parameter_estimator import DiscreteBayesianEstimator, DiscreteEM  # noqa: E402
from ppgm.adapters import MarkovNetworkEstimator, MissingValuesEM, load_bif_example  # noqa: E402

SEED = 2026


def with_holes(df: pd.DataFrame, rate: float, rule: str, order: list, rng) -> pd.DataFrame:
    out = df.copy()
    if rule == "MCAR":
        for c in out.columns:
            out.loc[rng.random(len(out)) < rate, c] = None
        return out
    driver = df[order[0]] == sorted(df[order[0]].unique())[0]
    share = float(driver.mean())
    lo = rate / (1.6 * share + 0.4 * (1 - share))  # the average over rows is `rate`
    p = np.where(driver, 1.6 * lo, 0.4 * lo)
    for c in order[5:]:
        out.loc[rng.random(len(out)) < p, c] = None
    return out


def bn_section(quick: bool, million: bool = False) -> list[str]:
    alarm = load_bif_example("alarm")
    edges = list(alarm.edges())
    states = {c.variable: list(c.state_names[c.variable]) for c in alarm.get_cpds()}
    order = list(pa.bayes_from_pgmpy(alarm).order)
    Ns = [10_000] if quick else [10_000, 100_000]
    rates = [0.1, 0.3] if quick else [0.1, 0.3, 0.5]
    lines = ["ALARM with missing cells (complete-case: pgmpy's DiscreteBayesianEstimator on the complete rows).", "",
             "| N | missing | rule | complete rows | complete-case KL | ppgm EM KL | EM iterations | complete-case s | ppgm EM s |",
             "|---|---|---|---|---|---|---|---|---|"]
    grid = list(itertools.product(Ns, rates, ["MCAR", "MAR"]))
    if million:  # the largest size at the smallest rate only (an E-step there calibrates ~10^6 distinct rows)
        grid += [(1_000_000, 0.1, "MCAR"), (1_000_000, 0.1, "MAR")]
    for N, rate, rule in grid:
        rng = np.random.default_rng([SEED, N, int(rate * 100), rule == "MAR"])
        df = pa.sample(alarm, N, seed=rng)
        holey = with_holes(df, rate, rule, order, rng)
        t0 = time.perf_counter()
        rows = holey.dropna()
        if len(rows):
            cc = DiscreteBayesianNetwork(edges)
            cc.fit(rows, estimator=DiscreteBayesianEstimator(prior_type="dirichlet", pseudo_counts=1, state_names=states))
            kl_cc = f"{pa.kl_divergence(alarm, cc):.4g}"
        else:
            kl_cc = "no complete row"
        t_cc = time.perf_counter() - t0
        t0 = time.perf_counter()
        em = DiscreteBayesianNetwork(edges)
        est = MissingValuesEM(progress=False, state_names=states)
        em.fit(holey, estimator=est)
        t_em = time.perf_counter() - t0
        row = (f"| {N:,} | {rate:.0%} | {rule} | {len(rows):,} | {kl_cc} | {pa.kl_divergence(alarm, em):.4g} | "
               f"{len(est.history_)}{'' if est.converged_ else ' (not converged)'} | {t_cc:.2f} | {t_em:.1f} |")
        print(row, flush=True)
        lines.append(row)
    return lines


def agrum_bn(gum, bn):
    """A pyAgrum BayesNet with ``bn``'s variables, states (as strings) and arcs."""
    g = gum.BayesNet()
    for v in bn.domain.variables:
        g.add(gum.LabelizedVariable(v, v, [str(s) for s in bn.domain.state_names[v]]))
    for v in bn.domain.variables:
        for u in bn.parents[v]:
            g.addArc(u, v)
    return g


def from_agrum(g, bn):
    """pyAgrum's CPTs as an engine BayesianNetwork on ``bn``'s domain (a tensor's ``toarray`` axes are its
    variables last first)."""
    from ppgm.models.bayes import BayesianNetwork

    cpts = {}
    for v in bn.domain.variables:
        p = g.cpt(v)
        axes = list(p.names)[::-1]
        cpts[v] = np.transpose(p.toarray(), [axes.index(n) for n in list(bn.parents[v]) + [v]])
    return BayesianNetwork(bn.domain, bn.parents, cpts)


def agrum_em(gum, engine, holey: pd.DataFrame, seed: int, eps: float, max_iter: int = 200, max_time: float = 600.0) -> tuple:
    """pyAgrum's EM on ``holey`` (missing as "?"), stopped when the log-likelihood changes by less than
    ``eps``, at ``max_iter`` or after ``max_time`` seconds: the learned engine BN, its iterations, how it
    stopped ("" on ``eps``, else "cap" or "time cap"), its time."""
    frame = holey.astype(object).where(holey.notna(), "?").astype(str)
    t0 = time.perf_counter()
    gum.initRandom(seed)
    learner = gum.BNLearner(frame, agrum_bn(gum, engine), ["?"])
    learner.useSmoothingPrior(1.0)
    learner.useEMWithDiffCriterion(eps)
    learner.EMsetMaxIter(max_iter)
    learner.EMsetMaxTime(max_time)
    learned = learner.learnParameters(agrum_bn(gum, engine).dag())
    t = time.perf_counter() - t0
    msg = learner.EMStateMessage()
    how = "" if "epsilon" in msg else "time cap" if "time" in msg else "cap"
    return from_agrum(learned, engine), learner.EMnbrIterations(), how, t


def networks_section(quick: bool, networks: list, sizes: list, settings: list, peer_max_n: int, peer_cells: list,
                     repeats: int, peer_max_time: float = 600.0, on_row=None) -> list[str]:
    import os
    import statistics

    try:
        import pyagrum as gum
        peer = f"pyAgrum {gum.__version__}"
    except ImportError:
        gum, peer = None, "pyAgrum (not installed)"
    if quick:
        sizes = [min(sizes)]
    lines = [f"Larger trees with missing cells: complete-case, {peer}'s BNLearner EM and ppgm's MissingValuesEM "
             "(KL to the truth; times in seconds; load: the machine's 1-minute load average before the row, 2 cores).", "",
             "| network | N | missing | rule | complete rows | complete-case KL | pyAgrum KL | pyAgrum it. | pyAgrum s "
             "| ppgm KL | ppgm it. | ppgm s | speed-up | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in networks:
        truth = load_bif_example(name)
        engine = pa.bayes_from_pgmpy(truth)
        edges = list(truth.edges())
        states = {c.variable: list(c.state_names[c.variable]) for c in truth.get_cpds()}
        order = list(engine.order)
        for N, setting in itertools.product(sizes, settings):
            pct, rule = setting.split(":")
            rate = int(pct) / 100
            load = os.getloadavg()[0]
            rng = np.random.default_rng([SEED, N, int(pct), rule == "MAR", len(name)])
            df = pa.sample(truth, N, seed=rng)
            holey = with_holes(df, rate, rule, order, rng)
            rows = holey.dropna()
            if len(rows):
                cc = DiscreteBayesianNetwork(edges)
                cc.add_nodes_from(truth.nodes())
                cc.fit(rows, estimator=DiscreteBayesianEstimator(prior_type="dirichlet", pseudo_counts=1, state_names=states))
                kl_cc = f"{pa.kl_divergence(truth, cc):.4g}"
            else:
                kl_cc = "no complete row"
            runs = []
            while len(runs) < repeats:
                t0 = time.perf_counter()
                em = DiscreteBayesianNetwork(edges)
                em.add_nodes_from(truth.nodes())
                est = MissingValuesEM(progress=False, state_names=states)
                em.fit(holey, estimator=est)
                runs.append(time.perf_counter() - t0)
                if runs[-1] > 30:
                    break
            t_em = statistics.median(runs)
            kl_em = pa.kl_divergence(truth, em)
            cell = f"{name}:{N}:{pct}:{rule}"
            if gum is not None and (N <= peer_max_n or cell in peer_cells):
                # ppgm stops when the objective's relative change is below tol = 1e-8; pyAgrum's rate criterion
                # did not stop at 1e-8 (Insurance, N = 500: over 15 minutes), so it gets the same rule as an
                # absolute change: 1e-8 of ppgm's final log-likelihood
                learned, it_ag, how, t_ag = agrum_em(gum, engine, holey, SEED, 1e-8 * abs(est.log_likelihood_),
                                                     max_time=peer_max_time)
                ag = [f"{pa.kl_divergence(truth, pa.bayes_to_pgmpy(learned)):.4g}", f"{it_ag}{f' ({how})' if how else ''}",
                      f"{t_ag:.1f}", f"{'>= ' if how == 'time cap' else ''}{t_ag / t_em:.0f}x"]
            else:
                ag = ["not run", "", "", ""]
            row = (f"| {name} | {N:,} | {rate:.0%} | {rule} | {len(rows):,} | {kl_cc} | {ag[0]} | {ag[1]} | {ag[2]} | "
                   f"{kl_em:.4g} | {len(est.history_)}{'' if est.converged_ else ' (not converged)'} | "
                   f"{t_em:.2f}{'' if len(runs) > 1 else ' (1 run)'} | {ag[3]} | {load:.1f} |")
            print(row, flush=True)
            lines.append(row)
            if on_row is not None:
                on_row(lines)
    return lines


def observed_kl(truth, model, hidden: str) -> float:
    """KL between the two networks' joints over every node but ``hidden``, by enumeration (each
    model's states put in the truth's order first)."""
    order = None

    def joint(bn):
        nonlocal order
        mn = pa.bayes_from_pgmpy(bn).to_markov()
        dom = mn.domain
        t = mn.joint_log_table()
        t = np.exp(t - t.max())
        t = t.sum(axis=dom.index(hidden))
        names = [v for v in dom.variables if v != hidden]
        if order is None:
            order = {v: list(dom.state_names[v]) for v in names}
        for ax, v in enumerate(names):  # states in the truth's order
            t = np.take(t, [list(dom.state_names[v]).index(s) for s in order[v]], axis=ax)
        return t / t.sum(), names
    p, names_p = joint(truth)
    q, names_q = joint(model)
    q = np.transpose(q, [names_q.index(v) for v in names_p])
    return float(np.sum(p * (np.log(p + 1e-300) - np.log(q + 1e-300))))


def latent_section(quick: bool) -> list[str]:
    asia = load_bif_example("asia")
    hidden = "either"
    N = 10_000
    lines = ["Asia, \"either\" never observed, N = 10,000: pgmpy's DiscreteEM against MissingValuesEM (pseudo_count=0).", "",
             "| seed | pgmpy DiscreteEM KL | ppgm EM KL | ppgm iterations | pgmpy s | ppgm s | speed-up |",
             "|---|---|---|---|---|---|---|"]
    for seed in ([0] if quick else [0, 1, 2]):
        df = pa.sample(asia, N, seed=[SEED, seed]).drop(columns=[hidden])
        t0 = time.perf_counter()
        ref = DiscreteBayesianNetwork(asia.edges(), latents={hidden})
        pg = DiscreteEM(latent_card={hidden: 2}, seed=seed, show_progress=False)
        pg.fit(ref, df)
        ref.add_cpds(*pg.parameters_)
        t_pg = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours = DiscreteBayesianNetwork(asia.edges())
        est = MissingValuesEM(pseudo_count=0.0, progress=False, seed=seed, state_names={hidden: ["no", "yes"]}, max_iter=1000)
        ours.fit(df, estimator=est)
        t_em = time.perf_counter() - t0
        row = (f"| {seed} | {observed_kl(asia, ref, hidden):.4g} | {observed_kl(asia, ours, hidden):.4g} | "
               f"{len(est.history_)} | {t_pg:.2f} | {t_em:.2f} | {t_pg / t_em:.0f}x |")
        print(row, flush=True)
        lines.append(row)
    return lines


def grid_network(rows: int, cols: int, k: int, seed: int) -> DiscreteMarkovNetwork:
    rng = np.random.default_rng(seed)
    name = lambda r, c: f"G{r}{c}"  # noqa: E731
    edges = [(name(r, c), name(r, c + 1)) for r in range(rows) for c in range(cols - 1)]
    edges += [(name(r, c), name(r + 1, c)) for r in range(rows - 1) for c in range(cols)]
    mn = DiscreteMarkovNetwork(edges)
    for a, b in edges:
        mn.add_factors(DiscreteFactor([a, b], [k, k], np.exp(rng.normal(0, 0.7, k * k)),
                                      state_names={a: list(range(k)), b: list(range(k))}))
    return mn


def mn_section(quick: bool) -> list[str]:
    from pgmpy.estimators import MirrorDescentEstimator

    cases = [("third-order chain 8 x 6", pa.dirichlet_chain_network(8, 6, seed=0)), ("grid 4 x 4, 3 states", grid_network(4, 4, 3, 0))]
    N = 20_000 if quick else 100_000
    iters = [100] if quick else [100, 1000, 5000]
    lines = [f"Complete records, N = {N:,}: MarkovNetworkEstimator against pgmpy's MirrorDescentEstimator.", "",
             "| network | N | ppgm KL | ppgm s | " + " | ".join(f"pgmpy MD {i:,} it. KL | s" for i in iters) + " |",
             "|---|---|---|---|" + "---|---|" * len(iters)]
    for name, mn in cases:
        df = pa.sample(mn, N, seed=SEED)
        cliques = [tuple(f.variables) for f in mn.get_factors()]
        MarkovNetworkEstimator(mn).estimate(df.iloc[:100], progress=False)  # warm: imports and first calls
        t0 = time.perf_counter()
        ours = MarkovNetworkEstimator(mn).estimate(df, progress=False)
        t_ours = time.perf_counter() - t0
        cells = [f"{pa.kl_divergence(mn, ours):.4g}", f"{t_ours:.2f}"]
        for it in iters:
            model = DiscreteMarkovNetwork(mn.edges())
            model.add_nodes_from(mn.nodes())
            for f in mn.get_factors():
                model.add_factors(DiscreteFactor(list(f.variables), list(f.cardinality), np.ones(int(np.prod(f.cardinality))),
                                                 state_names={v: f.state_names[v] for v in f.variables}))
            t0 = time.perf_counter()
            tree = MirrorDescentEstimator(model, data=df).estimate(marginals=cliques, iterations=it, show_progress=False)
            t_md = time.perf_counter() - t0
            fitted = DiscreteMarkovNetwork(mn.edges())
            fitted.add_nodes_from(mn.nodes())
            fitted.add_factors(*tree.factors)
            cells += [f"{pa.kl_divergence(mn, fitted):.4g}", f"{t_md:.2f}"]
        row = f"| {name} | {N:,} | " + " | ".join(cells) + " |"
        print(row, flush=True)
        lines.append(row)
    return lines


def mnmiss_section(quick: bool) -> list[str]:
    cases = [("third-order chain 8 x 6", pa.dirichlet_chain_network(8, 6, seed=0)), ("grid 4 x 4, 3 states", grid_network(4, 4, 3, 0))]
    grid = [(10_000, r) for r in ([0.1, 0.3] if quick else [0.1, 0.3, 0.5])] + ([] if quick else [(100_000, 0.1)])
    lines = ["Markov networks with missing cells: complete-case (MarkovNetworkEstimator on the complete rows) against "
             "its EM on every row.", "",
             "| network | N | missing | rule | complete rows | complete-case KL | ppgm EM KL | EM iterations | complete-case s | ppgm EM s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (name, mn), (N, rate), rule in itertools.product(cases, grid, ["MCAR", "MAR"]):
        rng = np.random.default_rng([SEED, N, int(rate * 100), rule == "MAR", len(name)])
        df = pa.sample(mn, N, seed=rng)
        holey = with_holes(df, rate, rule, list(df.columns), rng)
        rows = holey.dropna()
        t0 = time.perf_counter()
        kl_cc = f"{pa.kl_divergence(mn, MarkovNetworkEstimator(mn).estimate(rows, progress=False)):.4g}" if len(rows) else "no complete row"
        t_cc = time.perf_counter() - t0
        est = MarkovNetworkEstimator(mn)
        t0 = time.perf_counter()
        em = est.estimate(holey, progress=False)
        t_em = time.perf_counter() - t0
        row = (f"| {name} | {N:,} | {rate:.0%} | {rule} | {len(rows):,} | {kl_cc} | {pa.kl_divergence(mn, em):.4g} | "
               f"{len(est.history_)}{'' if est.converged_ else ' (not converged)'} | {t_cc:.2f} | {t_em:.1f} |")
        print(row, flush=True)
        lines.append(row)
    return lines


def merged_rows(rows: list, networks: list) -> list:
    """This run's table rows with those already in RESULTS.md's networks section that it did not measure
    again (a row is keyed by network, N, missing and rule), ordered by network, N and setting."""
    from _results import RESULTS

    text = RESULTS.read_text() if RESULTS.exists() else ""
    m = re.search(r"<!-- begin missing-networks -->(.*?)<!-- end missing-networks -->", text, re.S)
    old = [ln for ln in (m.group(1).splitlines() if m else []) if ln.startswith("| ") and not ln.startswith("| network")]
    key = lambda ln: tuple(c.strip() for c in ln.strip("|").split("|")[:4])  # noqa: E731
    table = {key(ln): ln for ln in old}
    table.update({key(ln): ln for ln in rows})
    known = list(dict.fromkeys(networks + ["insurance", "hailfinder", "win95pts"]))
    rank = lambda k: (known.index(k[0]) if k[0] in known else len(known), k[0], int(k[1].replace(",", "")),  # noqa: E731
                      k[3], int(k[2].rstrip("%")))
    return [table[k] for k in sorted(table, key=rank)]


def main(quick: bool, sections: list, million: bool = False, net_args: dict | None = None) -> None:
    head = [f"Machine: {machine()}. Seed {SEED}. KL(true || learned) in nats (exact); times in seconds, one run each, "
            "both libraries in the same process." + (" Quick grid." if quick else ""), ""]
    titles = {"bn": "## Missing values (`benchmarks/bench_missing.py`)", "latent": "### Missing values: a latent node",
              "networks": "### Missing values: larger junction trees, against pyAgrum",
              "mn": "### Missing values: Markov networks from records", "mnmiss": "### Missing values: Markov networks with holes"}
    for name, fn in (("bn", bn_section), ("networks", networks_section), ("latent", latent_section), ("mn", mn_section),
                     ("mnmiss", mnmiss_section)):
        if name in sections:  # each section its own block of RESULTS.md, so that one can be re-run alone
            if name == "networks":
                args = dict(net_args or {})
                merge = args.pop("merge", False)
                note = [f"Machine: {machine()}. Seed {SEED}. KL(true || learned) in nats (exact). Rows from one or "
                        "more runs of the section (`--merge`); each row's load says how contended the machine was.", ""]

                def write(out, merge=merge, note=note, title=titles[name]):  # after every row: a stopped run keeps its rows
                    if merge:  # rows of earlier runs kept unless this run measured them again
                        out = out[:4] + merged_rows(out[4:], args.get("networks", []))
                    write_section("missing-networks", "\n".join([title, ""] + note + out))
                fn(quick, **args, on_row=write)
                continue
            out = fn(quick, million) if name == "bn" else fn(quick)
            write_section(f"missing-{name}", "\n".join([titles[name], ""] + head + out))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sections", nargs="+", default=["bn", "networks", "latent", "mn", "mnmiss"],
                    choices=["bn", "networks", "latent", "mn", "mnmiss"])
    ap.add_argument("--million", action="store_true", help="add N = 1,000,000 at 10%% missing to the ALARM grid")
    ap.add_argument("--networks", nargs="+", default=["insurance", "hailfinder", "win95pts"], help="networks section: pgmpy's bundled networks")
    ap.add_argument("--sizes", nargs="+", type=int, default=[2_000, 20_000, 200_000], help="networks section: N")
    ap.add_argument("--settings", nargs="+", default=["10:MCAR", "30:MCAR", "30:MAR"], help="networks section: percent:rule")
    ap.add_argument("--peer-max-n", type=int, default=20_000, help="networks section: run pyAgrum up to this N")
    ap.add_argument("--peer-cells", nargs="*", default=[], help="networks section: and on these rows (name:N:percent:rule)")
    ap.add_argument("--repeats", type=int, default=3, help="networks section: ppgm runs per row (median) when under 30 s")
    ap.add_argument("--peer-max-time", type=float, default=600.0, help="networks section: pyAgrum's time limit per row (s)")
    ap.add_argument("--merge", action="store_true", help="networks section: keep the rows of earlier runs it does not re-measure")
    args = ap.parse_args()
    main(args.quick, args.sections, args.million,
         dict(networks=args.networks, sizes=args.sizes, settings=args.settings, peer_max_n=args.peer_max_n,
              peer_cells=args.peer_cells, repeats=args.repeats, merge=args.merge, peer_max_time=args.peer_max_time))
