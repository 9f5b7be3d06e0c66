"""Private synthetic copies of tables with numeric columns: ppgm's private bins against equal-width
bins over the public ranges and SmartNoise Synth's continuous-column handling.

Tables (public schemas below, nothing read from the records): Adult with its raw numeric columns
(bundled), diamonds (ggplot2's, as plotnine ships it) and the RAND Health Insurance Experiment
extract (statsmodels); both copied in ``benchmarks/data`` with their provenance. Each table is split
80/20 by a fixed seed: the release sees the 80%, the classifier is tested on the 20%.

Scores (lower is better but accuracy):
- 2-way TV: mean total variation over every pair of columns, numeric columns cut at the real
  data's deciles (repeated edges merged);
- W1 / range: 1-D Wasserstein distance of each numeric column over its public range, averaged;
- accuracy: a gradient-boosted classifier (scikit-learn's HistGradientBoosting) trained on the
  synthetic records, tested on the held-out real ones;
- seconds.
The sampling floor is two halves of the real training records against each other.

SmartNoise Synth (``snsynth``) runs in its own environment (``--smartnoise-python``; skipped when
absent) through ``_smartnoise_run.py``, as its documentation recommends: ``Synthesizer.create``
with ``continuous_columns`` and ``preprocessor_eps`` for the bounds it estimates, at the same
(epsilon, delta).

    python benchmarks/bench_numeric.py [--rho 0.05 0.5 5] [--slow-rho 0.5] [--seeds 1] [--methods ...]
        [--smartnoise-python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(__file__))
from _results import machine, write_section  # noqa: E402

DATA = Path(__file__).with_name("data")


def adult():
    import ppgm.adapters as pa

    train, test = pa.load_adult()
    df = pd.concat([train, test], ignore_index=True)
    schema_file = Path(pa.__file__).with_name("datasets") / "adult" / "schema.json"
    meta = json.loads(schema_file.read_text())
    schema = {c: list(s) for c, s in meta["categories"].items()}
    schema["income"] = ["<=50K", ">50K"]
    for c, (lo, hi) in meta["bounds"].items():
        schema[c] = {"min": lo, "max": hi, "integer": True}
    df["income"] = df["income"].str.rstrip(".")
    return df[list(schema)], schema, "income"


def diamonds():
    df = pd.read_csv(DATA / "diamonds.csv.gz")
    schema = {
        "carat": {"min": 0, "max": 6}, "cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
        "color": list("DEFGHIJ"), "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"],
        "depth": {"min": 40, "max": 80}, "table": {"min": 40, "max": 100}, "price": {"min": 0, "max": 20000, "integer": True},
        "x": {"min": 0, "max": 11}, "y": {"min": 0, "max": 60}, "z": {"min": 0, "max": 32},
    }
    return df[list(schema)], schema, "cut"


# the coinsurance levels as the data set writes them, log(1 + rate in percent): 0, 25, 50, 95 and 100
LNCOINS = [0.0, 3.2581, 3.9318, 4.5643, 4.6151]


def randhie():
    df = pd.read_csv(DATA / "randhie.csv.gz")
    df["lncoins"] = df["lncoins"].round(4)
    for c in ("idp", "physlm", "hlthg", "hlthf", "hlthp"):
        df[c] = df[c].round().astype(int)
    schema = {
        "mdvis": {"min": 0, "max": 80, "integer": True}, "lncoins": LNCOINS,
        "idp": [0, 1], "lpi": {"min": 0, "max": 8}, "fmde": {"min": 0, "max": 9}, "physlm": [0, 1],
        "disea": {"min": 0, "max": 60}, "hlthg": [0, 1], "hlthf": [0, 1], "hlthp": [0, 1],
    }
    return df[list(schema)], schema, "idp"


TABLES = {"adult": adult, "diamonds": diamonds, "randhie": randhie}


def split(df, seed=0):
    rng = np.random.default_rng(seed)
    test = rng.random(len(df)) < 0.2
    return df[~test].reset_index(drop=True), df[test].reset_index(drop=True)


def _numeric(schema):
    return [c for c, s in schema.items() if isinstance(s, dict)]


def _cut(real: pd.DataFrame, other: pd.DataFrame, schema) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both frames with numeric columns cut at the real data's deciles, categorical ones as codes."""
    a, b = {}, {}
    for c, s in schema.items():
        if isinstance(s, dict):
            edges = np.unique(np.quantile(real[c].astype(float), np.linspace(0, 1, 11))[1:-1])
            a[c] = np.searchsorted(edges, real[c].astype(float), side="right")
            b[c] = np.searchsorted(edges, pd.to_numeric(other[c], errors="coerce").astype(float), side="right")
        else:
            index = {v: i for i, v in enumerate(s)}
            a[c] = real[c].map(index).fillna(-1).to_numpy(int)
            b[c] = other[c].map(lambda v: index.get(v, index.get(_same(v, s), -1))).fillna(-1).to_numpy(int)
    return pd.DataFrame(a), pd.DataFrame(b)


def _same(v, states):
    for s in states:
        try:
            if float(v) == float(s):
                return s
        except (TypeError, ValueError):
            if str(v) == str(s):
                return s
    return None


def tv2(real, other, schema) -> float:
    a, b = _cut(real, other, schema)
    out = []
    for x, y in combinations(list(schema), 2):
        ka = a[x].to_numpy() * 1000 + a[y].to_numpy()
        kb = b[x].to_numpy() * 1000 + b[y].to_numpy()
        keys = np.union1d(ka, kb)
        pa_ = np.bincount(np.searchsorted(keys, ka), minlength=keys.size) / ka.size
        pb = np.bincount(np.searchsorted(keys, kb), minlength=keys.size) / kb.size
        out.append(0.5 * np.abs(pa_ - pb).sum())
    return float(np.mean(out))


def w1(real, other, schema) -> float:
    from scipy.stats import wasserstein_distance

    vals = []
    for c in _numeric(schema):
        lo, hi = schema[c]["min"], schema[c]["max"]
        x = pd.to_numeric(other[c], errors="coerce").dropna().astype(float)
        vals.append(wasserstein_distance(real[c].astype(float), x) / (hi - lo))
    return float(np.mean(vals))


def outside(other, schema) -> int:
    n = 0
    for c in _numeric(schema):
        x = pd.to_numeric(other[c], errors="coerce")
        n += int(((x < schema[c]["min"]) | (x > schema[c]["max"])).sum())
    return n


def accuracy(synth, test, schema, label) -> float:
    from sklearn.ensemble import HistGradientBoostingClassifier

    feats = [c for c in schema if c != label]

    def X(df):
        out = {}
        for c in feats:
            if isinstance(schema[c], dict):
                out[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
            else:
                index = {str(v): i for i, v in enumerate(schema[c])}
                out[c] = df[c].astype(str).map(index).astype(float)
        return pd.DataFrame(out)

    cat = np.array([not isinstance(schema[c], dict) for c in feats])
    synth = synth[synth[label].notna()]  # a label outside its states (a peer's decoding) trains nothing
    y = synth[label].astype(str)
    if y.nunique() < 2:
        return float((test[label].astype(str) == y.iloc[0]).mean())
    clf = HistGradientBoostingClassifier(categorical_features=cat, random_state=0).fit(X(synth), y)
    return float((clf.predict(X(test)) == test[label].astype(str)).mean())


def _by_hand(train, schema, bins):
    """What a user writes without the column layer: each numeric column cut into ``bins`` equal-width
    bins over its public range (values clipped into it), released as categorical codes."""
    frame, spec, edges = train.copy(), {}, {}
    for c, s in schema.items():
        if isinstance(s, dict):
            e = np.linspace(s["min"], s["max"], bins + 1)
            frame[c] = np.clip(np.searchsorted(e[1:-1], train[c].astype(float), side="right"), 0, bins - 1)
            spec[c], edges[c] = list(range(bins)), e
        else:
            spec[c] = s
    return frame, spec, edges


def _uniform_in_bins(synth, schema, edges, rng):
    out = synth.copy()
    for c, e in edges.items():
        k = synth[c].to_numpy(int)
        x = e[k] + rng.random(k.size) * (e[k + 1] - e[k])
        out[c] = np.floor(x).clip(schema[c]["min"], schema[c]["max"]).astype(int) if schema[c].get("integer") else x
    return out


def ppgm_run(train, schema, method, rho, seed, bins=None):
    import ppgm.adapters as pa

    frame, spec, edges = (train, schema, None) if bins is None else _by_hand(train, schema, bins)
    kw = dict(rho=rho, seed=seed, fit_seed=seed, progress=False)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "mst":
            rel = pa.mst_release(frame, spec, **kw)
        else:
            rel = pa.aim_release(frame, spec, workload=2, estimator="rounds", **kw)
    synth = rel.synthetic if edges is None else _uniform_in_bins(rel.synthetic, schema, edges, np.random.default_rng(seed))
    return synth, time.perf_counter() - t0


def smartnoise_run(python, train, schema, method, rho, seed, delta, bounds):
    from ppgm.privacy.mechanisms import zcdp_epsilon

    eps = zcdp_epsilon(rho, delta)
    with tempfile.TemporaryDirectory() as tmp:
        train.to_csv(Path(tmp) / "train.csv", index=False)
        job = {"train": str(Path(tmp) / "train.csv"), "out": str(Path(tmp) / "synth.csv"), "method": method, "epsilon": eps,
               "delta": delta, "continuous": _numeric(schema), "seed": seed, "bounds": bounds, "bins": 10, "share": 0.1,
               "ranges": {c: [schema[c]["min"], schema[c]["max"]] for c in _numeric(schema)}}
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        t0 = time.perf_counter()
        got = subprocess.run([python, str(Path(__file__).with_name("_smartnoise_run.py")), str(Path(tmp) / "job.json")],
                             capture_output=True, text=True, timeout=3600)
        seconds = time.perf_counter() - t0
        if got.returncode != 0:
            raise RuntimeError(got.stderr[-2000:])
        synth = pd.read_csv(Path(tmp) / "synth.csv")
    for c, s in schema.items():  # categorical states back to the schema's values (CSV text)
        if not isinstance(s, dict):
            synth[c] = synth[c].map(lambda v: _same(v, s))
    return synth, seconds


def main(args) -> None:
    rows = []
    reuse = {}
    if args.reuse and Path(args.reuse).exists():  # runs of an interrupted invocation, same code and seeds
        for r in pd.read_json(args.reuse, lines=True).to_dict("records"):
            if r.get("key"):
                reuse[(r["table"], r["rho"], r["key"], r["seed"])] = r
    for name in args.tables:
        df, schema, label = TABLES[name]()
        train, test = split(df)
        half = np.random.default_rng(1).random(len(train)) < 0.5
        floor = tv2(train[half].reset_index(drop=True), train[~half].reset_index(drop=True), schema)
        rows.append({"table": name, "rho": "-", "method": "two halves of the real data", "tv": floor, "w1": float("nan"),
                     "acc": accuracy(train[half], test, schema, label), "seconds": 0.0, "outside": 0})
        print(rows[-1], flush=True)
        for rho in args.rho:
            for method in args.methods:
                if ("aim" in method or method.startswith("smartnoise")) and args.slow_rho and rho not in args.slow_rho:
                    continue
                for seed in range(args.seeds):
                    key = (name, rho, method, seed)
                    if key in reuse:
                        rows.append(reuse[key])
                        continue
                    if method.startswith("smartnoise"):
                        if not args.smartnoise_python:
                            continue
                        _, kind, bounds = method.split("-")
                        synth, sec = smartnoise_run(args.smartnoise_python, train, schema, kind, rho, seed, args.delta, bounds)
                        label_m = f"SmartNoise {kind.upper()}, " + ("public bounds, 10 bins" if bounds == "public" else
                                                                   "bounds from 0.1 of epsilon")
                    else:
                        kind, _, bins = method.partition("-")
                        synth, sec = ppgm_run(train, schema, kind, rho, seed, int(bins) if bins else None)
                        label_m = f"ppgm {kind.upper()}, " + (f"{bins} equal-width bins" if bins else "private bins")
                    rows.append({"table": name, "rho": rho, "method": label_m, "key": method, "seed": seed, "tv": tv2(train, synth, schema),
                                 "w1": w1(train, synth, schema), "acc": accuracy(synth, test, schema, label), "seconds": sec,
                                 "outside": outside(synth, schema)})
                    print(rows[-1], flush=True)
                    with open(args.log + ".partial", "a") as fh:
                        fh.write(json.dumps(rows[-1]) + "\n")
    out = pd.DataFrame(rows)
    out.to_json(Path(args.log), orient="records", lines=True)
    agg = out.groupby(["table", "rho", "method"], sort=False).agg(
        tv=("tv", "mean"), tv_sd=("tv", "std"), w1=("w1", "mean"), acc=("acc", "mean"), seconds=("seconds", "median"),
        outside=("outside", "sum"), runs=("tv", "size")).reset_index()
    lines = ["## Numeric columns: private synthetic copies", "",
             f"`python benchmarks/bench_numeric.py {' '.join(sys.argv[1:])}` ({machine()}). Mean over {args.seeds} seed(s); "
             "2-way TV with numeric columns cut at the real deciles; W1 / range averaged over the numeric columns; accuracy of a "
             "gradient-boosted classifier trained on the synthetic records, tested on 20% held-out real ones; seconds the median. "
             "ppgm AIM here is `workload=2, estimator=\"rounds\"`.", "",
             "| table | rho | method | 2-way TV | W1 / range | accuracy | seconds | values outside the range |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in agg.itertuples():
        sd = f" ({r.tv_sd:.4f})" if r.runs > 1 and np.isfinite(r.tv_sd) else ""
        w = "-" if not np.isfinite(r.w1) else f"{r.w1:.4f}"
        lines.append(f"| {r.table} | {r.rho} | {r.method} | {r.tv:.4f}{sd} | {w} | {r.acc:.3f} | {r.seconds:.1f} | {r.outside} |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section("numeric", text)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", nargs="+", default=list(TABLES))
    ap.add_argument("--rho", nargs="+", type=float, default=[0.05, 0.5, 5.0])
    ap.add_argument("--methods", nargs="+", default=["mst", "aim", "mst-10", "mst-50", "smartnoise-mst-public",
                                                     "smartnoise-aim-public", "smartnoise-mst-private"])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--slow-rho", nargs="*", type=float, default=None,
                    help="run AIM and SmartNoise at these budgets only (the others at every --rho)")
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--smartnoise-python", default=None)
    ap.add_argument("--log", default=str(Path(__file__).with_name("logs") / "numeric_runs.jsonl"))
    ap.add_argument("--reuse", default=None, help="a log of runs to take instead of running them again (same code)")
    ap.add_argument("--no-write", dest="write", action="store_false")
    main(ap.parse_args())
