import numpy as np
import pandas as pd
import pytest
from pgmpy.models import DiscreteBayesianNetwork
from pgmpy.parameter_estimator import DiscreteMLE

from ppgm.adapters import RobustFilter, load_bif_example, sample, total_variation


def _corrupted_asia(n=20_000, eps=0.1, seed=0):
    asia = load_bif_example("asia")
    rng = np.random.default_rng(seed)
    df = sample(asia, n, seed=rng)
    bad = rng.choice(n, int(eps * n), replace=False)
    df.loc[bad, list(df.columns)] = "yes"  # an adversary's cluster: every finding present
    return asia, df, bad


def test_bn_fit_round_trip_equals_mle_on_the_kept_rows():
    asia, df, bad = _corrupted_asia()
    before = df.copy()
    est = RobustFilter(epsilon=0.1, seed=0, progress=False)
    bn = DiscreteBayesianNetwork(asia.edges())
    bn.fit(df, estimator=est)
    pd.testing.assert_frame_equal(df, before)  # the caller's data is untouched
    assert bn.check_model()
    assert est.inlier_mask_.shape == (len(df),) and est.inlier_mask_[bad].mean() < 0.01
    ref = DiscreteBayesianNetwork(asia.edges())
    ref.fit(df[est.inlier_mask_], estimator=DiscreteMLE(state_names=est.state_names_))
    for cpd in ref.get_cpds():
        assert bn.get_cpds(cpd.variable) == cpd
    assert total_variation(asia, bn) < total_variation(asia, DiscreteBayesianNetwork(asia.edges()).fit(df)) / 3
    assert {"eigenvalue", "null_threshold", "threshold", "removed", "kept", "estimated_fraction"} <= set(est.history_[0])
    assert est.history_[0]["eigenvalue"] > 10 * est.history_[0]["null_threshold"]  # the cluster stands out
    assert sum(h["removed"] for h in est.history_) <= 2000  # epsilon bounds what may go
    assert est.estimated_fraction_ == pytest.approx(0.1, abs=0.015)
    single = RobustFilter(epsilon=0.1, mode="single_pass", seed=0, progress=False).fit(asia, df)
    assert (~single.inlier_mask_).sum() == 2000  # the authors' quota


def test_binary_encoding_path_and_params():
    asia, df, bad = _corrupted_asia(seed=1)
    est = RobustFilter(epsilon=0.1, encoding="binary", seed=0, progress=False).fit(asia, df)
    assert est.inlier_mask_[bad].mean() < 0.02
    assert est.get_params()["epsilon"] == 0.1
    assert est.get_tag("supports_weighted_data") is False


def test_bad_input():
    asia, df, _ = _corrupted_asia(n=500)
    with pytest.raises(ValueError, match="epsilon"):
        RobustFilter(epsilon=0.6).fit(asia, df)
    with pytest.raises(ValueError, match="encoding"):
        RobustFilter(encoding="ternary").fit(asia, df)
    with pytest.raises(ValueError, match=r"data: the model's nodes \['smoke'\] are not columns of the data"):
        RobustFilter(progress=False).fit(asia, df.drop(columns=["smoke"]))
    names = {v: ["no", "yes"] for v in asia.nodes()}
    names["smoke"] = ["no"]
    with pytest.raises(ValueError, match="not among its states|unexpected states"):
        RobustFilter(progress=False, state_names=names).fit(asia, df)
