import subprocess
import sys

from ppgm.adapters.cli import main
from ppgm.adapters.demo import run_demo


def test_help_lists_demo():
    out = subprocess.run([sys.executable, "-m", "ppgm", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in out.stdout


def test_demo_report_has_every_step_and_small_errors(tmp_path):
    lines = []
    run_demo(seed=1, progress=False, out=lines.append, plots=tmp_path / "figs", size="test")  # the steps on fewer records
    text = "\n".join(lines)
    for title in ("Exact inference", "Sampling, KL", "Loopy belief propagation", "Robust CPTs", "differentially private",
                  "inconsistent sample sets", "aggregated tables only", "missing cells", "privately chosen cliques"):
        assert title in text
    pngs = sorted(p.name for p in (tmp_path / "figs").glob("*.png"))
    assert pngs == ["inference_error.png", "maxent_training_curve.png", "mer_graph.png", "missing_values_kl.png", "private_tables_kl.png",
                    "robust_filter_tv.png"]
    miss_line = next(l for l in lines if "complete-case" in l and "MissingValuesEM" in l)
    cc_kl = float(miss_line.split("complete-case ")[1].split(",")[0])
    em_kl = float(miss_line.split("MissingValuesEM ")[1].split(" ")[0])
    assert em_kl < cc_kl / 5 and "converged True" in miss_line
    graph_line = next(l for l in lines if l.strip().startswith("graph:"))
    assert "recall 1.00" in graph_line
    nllh_line = next(l for l in lines if "test NLLH: MaxEnt" in l)
    ours = float(nllh_line.split("aggregates ")[1].split(" ")[0])
    nb = float(nllh_line.split("Naive Bayes ")[1])
    assert ours > 0.39 and ours > nb + 0.1
    kl_line = next(l for l in lines if "KL(true || learned)" in l)
    naive_kl = float(kl_line.split("naive MLE ")[1].split(" ")[0])
    cal_kl = float(kl_line.split("calibrated L2 ")[1].split(",")[0])
    cgm_kl = float(kl_line.split("CGM-EM ")[1].split(" ")[0])
    assert cgm_kl < naive_kl and cal_kl < naive_kl
    syn_line = next(l for l in lines if "2-way marginals" in l)
    assert float(syn_line.rsplit(" ", 1)[1]) < 0.05  # the tree model of CHILD's records at rho = 0.1
    tv_line = next(l for l in lines if "estimated TV to ALARM" in l)
    tv = dict(part.strip().rsplit(" ", 1) for part in tv_line.split(":", 1)[1].split(","))
    assert float(tv["RobustFilter"]) < float(tv["MLE"]) / 3
    assert float(tv["RobustFilter"]) < float(tv["MLE on the clean rows"]) + 0.02
    err_line = next(l for l in lines if "max |error|" in l)
    ours = float(err_line.split("ppgm ")[1].split(",")[0])
    assert ours < 1e-10
    assert "done in" in lines[-1]


def test_main_without_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage" in capsys.readouterr().out


def test_synthesize_writes_the_synthetic_records_the_release_and_the_report(tmp_path):
    import json

    import numpy as np
    import pandas as pd

    from ppgm.adapters import NoisyTables

    rng = np.random.default_rng(0)
    a = rng.choice(["x", "y"], 3000)
    df = pd.DataFrame({"a": a, "b": np.where(rng.random(3000) < 0.9, a, "z"), "c": rng.choice(["1", "2", "3"], 3000)})
    df.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps({"a": ["x", "y"], "b": ["x", "y", "z"], "c": [1, 2, 3]}))
    out = tmp_path / "out"
    assert main(["synthesize", str(tmp_path / "data.csv"), "--domain", str(tmp_path / "domain.json"), "--rho", "0.5",
                 "--out", str(out), "--estimator", "naive", "--no-progress"]) == 0
    syn = pd.read_csv(out / "synthetic.csv", dtype=str)
    report = json.loads((out / "privacy_report.json").read_text())
    release = NoisyTables.load(out / "release.npz")
    assert list(syn.columns) == ["a", "b", "c"] and set(syn["b"]) <= {"x", "y", "z"}
    assert abs(len(syn) - 3000) < 200
    assert abs(report["rho"] - 0.5) < 1e-12 and report["private"] and len(report["selected"]) == 2
    assert release.private and len(release) == 5
    assert abs((syn["a"] == syn["b"]).mean() - (df["a"] == df["b"]).mean()) < 0.05
    # AIM: the same files, its rounds charged, the strong pair found
    out2 = tmp_path / "aim"
    assert main(["synthesize", str(tmp_path / "data.csv"), "--domain", str(tmp_path / "domain.json"), "--rho", "0.5",
                 "--out", str(out2), "--estimator", "naive", "--method", "aim", "--workload", "2", "--no-progress"]) == 0
    report = json.loads((out2 / "privacy_report.json").read_text())
    assert abs(report["rho"] - 0.5) < 1e-12 and report["private"] and report["selected"][0]["clique"] == ["a", "b"]
    assert len(NoisyTables.load(out2 / "release.npz")) == 3 + len(report["selected"])
