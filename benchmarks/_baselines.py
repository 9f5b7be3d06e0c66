"""Plain baselines the benchmarks compare ppgm's learners with, written once."""

from __future__ import annotations

import numpy as np

from ppgm import nllh
from ppgm.adapters.aggregated import quadratic_one_hot


def quadratic_logistic(train_codes, train_y, test_codes, test_y, cards, seed=0, max_iter=200):
    """The MaxEnt paper's skyline: scikit-learn's logistic regression (lbfgs) on one-hot singles plus every
    pair cross, trained on the raw rows; the L2 weight chosen on a 20% validation split of the training rows
    over 2^k, k = -2..8 (per-record loss sum + lambda ||w||^2), then refit on all of them.

    Returns (test NLLH, chosen lambda, the refit function) — the refit is returned so callers can time it.
    Unseen codes (-1) are mapped to the first state, as the MaxEnt model's one-hot would drop them."""
    from sklearn.linear_model import LogisticRegression

    Xtr = quadratic_one_hot(np.maximum(np.asarray(train_codes), 0), cards)
    Xte = quadratic_one_hot(np.maximum(np.asarray(test_codes), 0), cards)
    ytr, yte = np.asarray(train_y), np.asarray(test_y)
    val = np.random.default_rng(seed).random(len(ytr)) < 0.2
    best = (-np.inf, None)
    for k in range(-2, 9):
        lam = 2.0**k
        m = LogisticRegression(C=1 / (2 * lam), max_iter=max_iter).fit(Xtr[~val], ytr[~val])
        score = nllh(ytr[val], m.predict_proba(Xtr[val])[:, 1])
        if score > best[0]:
            best = (score, lam)

    def refit():
        return LogisticRegression(C=1 / (2 * best[1]), max_iter=max_iter).fit(Xtr, ytr)

    return nllh(yte, refit().predict_proba(Xte)[:, 1]), best[1], refit
