"""ppgm.adapters.mer / ini on DataFrames: pgmpy exports checked with pgmpy's own inference."""

import numpy as np
import pandas as pd
import pytest
from pgmpy.inference import VariableElimination

from ppgm.adapters import ini, mer
from ppgm.models.random_models import gaussian_cycle, overlapping_sample_sets


def _gaussian_frames(n=8, seed=0):
    J, edges = gaussian_cycle(n, seed=seed)
    sets = overlapping_sample_sets(np.linalg.inv(J), extra=1, seed=seed + 1)
    names = [f"x{i}" for i in range(n)]
    frames = [pd.DataFrame(rows + 2.0, columns=[names[i] for i in ix]) for ix, rows in sets]
    return frames, [(names[i], names[j]) for i, j in edges]


def test_gaussian_mer_recovers_cycle_and_exports_linear_gaussian_bn():
    frames, truth = _gaussian_frames()
    fit = mer(frames, kind="gaussian", gamma_ratio=10)
    assert {frozenset(e) for e in fit.edges()} == {frozenset(e) for e in truth}
    assert fit.means["x0"] == pytest.approx(2.0, abs=0.2)
    bn = fit.to_linear_gaussian_bn(order=list(fit.variables))
    mean, cov = bn.to_joint_gaussian()
    order = list(__import__("networkx").topological_sort(bn))
    idx = [fit.variables.index(v) for v in order]
    np.testing.assert_allclose(cov, fit.covariance[np.ix_(idx, idx)], atol=1e-4)  # coefficients below 1e-5 dropped
    np.testing.assert_allclose(mean, [fit.means[v] for v in order], atol=1e-8)
    again = fit.refit(gamma_ratio=2)
    assert again.gamma == pytest.approx(2 * fit.s_tilde) and again.program_ is fit.program_
    frame = fit.constraints_frame()
    assert set(frame.columns) >= {"scope", "tolerance", "divergence", "dual", "active"}
    with pytest.raises(ValueError, match="Gaussian fit"):
        fit.to_markov_network()


def test_discrete_mer_exports_a_markov_network_with_state_names():
    rng = np.random.default_rng(1)
    n = 2000
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.85, a, 1 - a)
    c = np.where(rng.random(n) < 0.85, b, 1 - b)
    lab = np.array(["lo", "hi"])
    full = pd.DataFrame({"A": lab[a], "B": lab[b], "C": lab[c]})
    frames = [full[["A", "B"]].iloc[:1000], full[["B", "C"]].iloc[1000:]]
    fit = mer(frames, kind="discrete", gamma_ratio=4)
    assert fit.edges() == [("A", "B"), ("B", "C")]
    mn = fit.to_markov_network()
    assert set(mn.states["A"]) == {"hi", "lo"}
    q = VariableElimination(mn).query(["A", "B"], joint=True)
    q.normalize()
    table = fit.marginals[("A", "B")]
    for i, sa in enumerate(fit.domain.state_names["A"]):
        for j, sb in enumerate(fit.domain.state_names["B"]):
            assert q.get_value(A=sa, B=sb) == pytest.approx(table[i, j], abs=2e-3)
    with pytest.raises(ValueError, match="discrete fit"):
        fit.to_linear_gaussian_bn(["A", "B", "C"])


def test_ini_and_input_errors():
    frames, _ = _gaussian_frames()
    res = ini(frames)
    assert res.program == "ini" and res.s_tilde > 0
    with pytest.raises(ValueError, match="kind"):
        mer(frames, kind="poisson")
    with pytest.raises(ValueError, match="s~"):
        mer(frames, gamma=res.s_tilde / 2)
    with pytest.raises(ValueError, match="unknown variables"):
        mer(frames, variables=["x0", "x1"])
    with pytest.raises(ValueError, match="non-numeric"):
        mer([pd.DataFrame({"a": ["u", "v", "w"], "b": [1.0, 2.0, 3.0]})])
    with pytest.raises(ValueError, match="constant"):
        mer([pd.DataFrame({"a": ["u", "u", "u"], "b": ["x", "y", "x"]})], kind="discrete")
    with pytest.raises(TypeError, match="DataFrame"):
        mer([np.zeros((3, 2))])


def test_sample_set_mistakes_get_clear_errors_or_warnings():
    frames, _ = _gaussian_frames(n=6, seed=1)
    with pytest.raises(ValueError, match=r"samples\[2\]: the same rows as samples\[1\]"):
        ini([frames[0], frames[1], frames[1].copy()])
    # a bool column in one set, numbers in the others
    odd = frames[0].copy()
    col = odd.columns[0]
    odd[col] = odd[col] > 0
    with pytest.raises(ValueError, match=rf"column '{col}' holds different kinds of values.*bool in samples\[0\]"):
        ini([odd] + frames[1:])
    # 0/1 in one set, "0"/"1" in another: four states if read as they are
    rng = np.random.default_rng(0)
    a = pd.DataFrame({"u": rng.integers(0, 2, 300), "v": rng.integers(0, 2, 300)})
    b = pd.DataFrame({"v": rng.integers(0, 2, 300).astype(str), "w": rng.integers(0, 2, 300)})
    with pytest.raises(ValueError, match=r"column 'v' holds different kinds of values across sets \(number in samples\[0\]; text in samples\[1\]\)"):
        ini([a, b], kind="discrete")
    # b = 2a inside one set
    twice = frames[0].copy()
    c0, c1 = twice.columns[:2]
    twice[c1] = 2 * twice[c0]
    with pytest.raises(ValueError, match=rf"samples\[0\]: columns \('{c0}', '{c1}'\) are exactly proportional"):
        ini([twice] + frames[1:])
    # a column constant in one set only: a warning naming the set and the column
    filled = frames[0].copy()
    filled[c0] = 0.0
    with pytest.warns(UserWarning, match=rf"samples\[0\]: columns \['{c0}'\] are constant in this set but vary in others"):
        ini([filled] + frames[1:])
    # a tiny extra set: a warning (it inflates s~, and the default gamma with it)
    with pytest.warns(UserWarning, match=r"samples\[.+\]: only 4 rows"):
        ini(frames + [frames[0].iloc[:4]])
    # float columns read as discrete states: refused, with the way out
    floats = pd.DataFrame({"x": rng.normal(size=500), "y": rng.integers(0, 2, 500)})
    with pytest.raises(ValueError, match="'x' has 500 distinct values.*bin it first"):
        ini([floats], kind="discrete")


def test_keep_all_reproduces_the_fitted_marginals_where_the_sparse_reading_drops_an_edge():
    rng = np.random.default_rng(4)
    n = 3000
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.9, a, 1 - a)  # strong
    c = np.where(rng.random(n) < 0.6, b, 1 - b)  # weak
    full = pd.DataFrame({"A": a, "B": b, "C": c})
    frames = [full[["A", "B"]].iloc[:1500], full[["B", "C"]].iloc[1500:]]
    fit = mer(frames, kind="discrete", gamma_ratio=2, graph_tol=0.3)  # a threshold that drops the weak edge
    assert fit.edges() == [("A", "B")]
    for keep_all, close in ((True, True), (False, False)):
        q = VariableElimination(fit.to_markov_network(keep_all=keep_all)).query(["B", "C"], joint=True)
        q.normalize()
        got = np.array([[q.get_value(B=i, C=j) for j in (0, 1)] for i in (0, 1)])
        gap = np.abs(got - fit.marginals[("B", "C")]).max()
        assert (gap < 1e-6) if close else (gap > 1e-2), (keep_all, gap)
