import numpy as np
import pytest
from conftest import brute_log_z, brute_marginal, indicator_moments, small_markov_networks
from hypothesis import HealthCheck, given, settings, strategies as st

from ppgm import Domain, Factor, JunctionTree, JunctionTreeTooLarge, MarkovNetwork, infer
from ppgm.inference.junction_tree import SCALED_RANGE
from ppgm.models.random_models import grid, pairwise_dirichlet, third_order_chain


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks())
def test_marginals_and_log_z_match_enumeration(model):
    jt = JunctionTree.build(model.domain, model.scopes)
    cal = jt.calibrate(model)
    assert cal.log_z == pytest.approx(brute_log_z(model), abs=1e-9, rel=1e-12)
    for f in model.factors:
        np.testing.assert_allclose(cal.marginal(f.variables).values, brute_marginal(model, f.variables), atol=1e-10)
    # every clique marginal and an out-of-clique query over the first and last variable
    for c, m in zip(jt.cliques, cal.clique_marginals()):
        np.testing.assert_allclose(m.values, brute_marginal(model, c), atol=1e-10)
    vs = (model.domain.variables[-1], model.domain.variables[0])
    np.testing.assert_allclose(cal.marginal(vs).values, brute_marginal(model, vs), atol=1e-10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=7, max_scope=3), st.integers(0, 2**31 - 1))
def test_batched_marginals_match_enumeration_and_the_one_by_one_queries(model, seed):
    """Calibration.marginals (shared clique sums, messages shared between queries) gives every scope's
    table as enumeration of the joint does, in the scope's order, for queries in and out of the cliques
    and repeated ones, on loopy graphs, forests and potentials of any scale."""
    rng = np.random.default_rng(seed)
    names = model.domain.variables
    scopes = [tuple(names[i] for i in rng.choice(len(names), size=int(rng.integers(1, min(4, len(names)) + 1)), replace=False))
              for _ in range(12)]
    scopes += [f.variables for f in model.factors] + scopes[:3]
    cal = JunctionTree.build(model.domain, model.scopes).calibrate(model)
    batched = cal.marginals(scopes)
    for q, f in zip(scopes, batched):
        assert f.variables == q
        np.testing.assert_allclose(f.values, brute_marginal(model, q), atol=1e-10)
        np.testing.assert_allclose(f.values, cal.marginal(q).values, atol=1e-12)


def test_batched_marginals_on_a_wide_tree_share_messages_and_match_enumeration():
    """Triples spread over a tree of many cliques (each answered where two of its variables meet, the
    third carried in): the shared messages give the enumerated tables."""
    m = third_order_chain(9, 2, seed=5)
    cal = JunctionTree.build(m.domain, m.scopes).calibrate(m)
    names = m.domain.variables
    triples = [(names[a], names[b], names[c]) for a in range(9) for b in range(a + 1, 9) for c in range(9) if c not in (a, b)]
    for q, f in zip(triples, cal.marginals(triples)):
        np.testing.assert_allclose(f.values, brute_marginal(m, q), atol=1e-12)


def _min_fill_reference(domain, scopes):
    """Greedy min-fill as first written (each vertex's fill counted pair by pair): the reference the
    bit-mask counts must reproduce exactly, cliques and their order."""
    n = len(domain)
    adj = [set() for _ in range(n)]
    for s in scopes:
        idx = domain.indices(s)
        for a in idx:
            adj[a].update(b for b in idx if b != a)
    logcard = np.log(np.asarray(domain.cards, dtype=float))

    def score(v):
        nb = list(adj[v])
        fill = sum(1 for i, a in enumerate(nb) for b in nb[i + 1:] if b not in adj[a])
        return (fill, logcard[v] + sum(logcard[a] for a in nb), v)
    alive = set(range(n))
    scores = {v: score(v) for v in alive}
    cliques = []
    while alive:
        v = min(alive, key=scores.__getitem__)
        nb = adj[v]
        cliques.append(frozenset(nb | {v}))
        for a in nb:
            adj[a].update(b for b in nb if b != a)
            adj[a].discard(v)
        alive.discard(v)
        del scores[v]
        touched = set(nb)
        for a in nb:
            touched |= adj[a]
        for u in touched & alive:
            scores[u] = score(u)
        adj[v] = set()
    by_size = sorted(range(len(cliques)), key=lambda i: -len(cliques[i]))
    maximal = []
    for i in by_size:
        if cliques[i] and not any(cliques[i] <= c for c in maximal):
            maximal.append(cliques[i])
    order = {c: i for i, c in enumerate(cliques)}
    maximal.sort(key=order.__getitem__)
    return [tuple(domain.variables[i] for i in sorted(c)) for c in maximal]


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.integers(1, 80), st.integers(0, 2**31 - 1))
def test_min_fill_elimination_is_the_reference_one(n, k, seed):
    """The elimination's fill counts (bit masks) and cached table sizes choose exactly the cliques, in the
    same order, as the pair-by-pair reference on random graphs of mixed cardinalities (ties included)."""
    from ppgm.inference.junction_tree import _elimination_cliques

    rng = np.random.default_rng(seed)
    dom = Domain(tuple(f"V{i}" for i in range(n)), tuple(int(c) for c in rng.integers(2, 9, n)))
    scopes = [tuple(dom.variables[j] for j in sorted(rng.choice(n, min(n, int(rng.integers(1, 5))), replace=False)))
              for _ in range(k)]
    assert _elimination_cliques(dom, scopes) == _min_fill_reference(dom, scopes)


@settings(max_examples=30, deadline=None)
@given(small_markov_networks(max_vars=7, max_scope=2))
def test_any_three_variable_query_matches_enumeration(model):
    cal = JunctionTree.build(model.domain, model.scopes).calibrate(model)
    vs = model.domain.variables[::2][:3]
    np.testing.assert_allclose(cal.marginal(vs).values, brute_marginal(model, vs), atol=1e-10)


def test_queries_inside_large_cliques_and_memoised_homes_match_enumeration():
    """Pairs inside cliques of 5^4 = 625 cells take the unchecked einsum onto the pair, in either order;
    the homes memoised per scope are the ones a fresh search finds, whatever order asked first."""
    m = third_order_chain(6, 5, seed=4)
    jt = JunctionTree.build(m.domain, m.scopes)
    cal = jt.calibrate(m)
    assert cal._probs is not None and min(m.domain.size(c) for c in jt.cliques) >= 256  # the scaled schedule's tables
    vs = m.domain.variables
    pairs = [(vs[i], vs[j]) for i in range(6) for j in range(6) if i != j and abs(i - j) <= 3]
    for p in pairs:
        np.testing.assert_allclose(cal.marginal(p).values, brute_marginal(m, p), atol=1e-12)
        assert cal.marginal(p).variables == p
    fresh = JunctionTree.build(m.domain, m.scopes)
    for p in pairs + [(vs[0], vs[5]), ()]:
        assert jt.find_home(p) == fresh._find_home(tuple(p))


def test_queries_held_by_separators_sum_the_separator_and_match_enumeration():
    """A scope that a separator holds is summed from the (smaller) separator table, derived once per
    calibration; every query of up to three variables, in any order, matches enumeration, and the
    returned tables are the caller's own (changing one leaves the next query intact)."""
    m = third_order_chain(7, 4, seed=5)
    jt = JunctionTree.build(m.domain, m.scopes)
    cal = jt.calibrate(m)
    assert cal._probs is not None
    vs = m.domain.variables
    held = jt._smallest_holder((vs[2], vs[1]))
    assert held[1] and set(jt.separators[held[0]]) >= {vs[1], vs[2]}  # a separator, not a clique
    assert jt._smallest_holder((vs[0], vs[3]))[1] is False  # only the first clique holds both
    import itertools
    for r in (1, 2, 3):
        for q in itertools.permutations(vs[:5], r):
            if jt.find_home(q) is None:
                continue
            f = cal.marginal(q)
            assert f.variables == q
            np.testing.assert_allclose(f.values, brute_marginal(m, q), atol=1e-12)
    for q in ((vs[1], vs[2]), jt.cliques[0], jt.separators[jt.order[1]], tuple(reversed(jt.cliques[0]))):
        f = cal.marginal(q)  # a whole clique or separator too: a copy, never a view of the beliefs
        f.values[...] = -1.0
        np.testing.assert_allclose(cal.marginal(q).values, brute_marginal(m, q), atol=1e-12)


def test_junction_tree_properties_on_chain():
    m = third_order_chain(10, 3, seed=0)
    jt = JunctionTree.build(m.domain, m.scopes)
    assert sorted(len(c) for c in jt.cliques) == [4] * 7  # the triangulated third-order chain
    # running intersection: each variable's cliques form a connected subtree
    for v in m.domain.variables:
        holders = {i for i, c in enumerate(jt.cliques) if v in c}
        tops = [i for i in holders if jt.parent[i] not in holders]
        assert len(tops) == 1
    # separators are intersections with the parent
    for i in jt.order[1:]:
        assert set(jt.separators[i]) == set(jt.cliques[i]) & set(jt.cliques[jt.parent[i]])


def test_separator_marginals_agree_with_both_cliques():
    m = third_order_chain(8, 4, seed=3)
    jt = JunctionTree.build(m.domain, m.scopes)
    cal = jt.calibrate(m)
    for (child, par), sep in cal.separator_marginals().items():
        for i in (child, par):
            f = cal.clique_marginals()[i].sum_to(sep.variables)
            np.testing.assert_allclose(f.values, sep.values, atol=1e-12)


def test_scale_invariance_in_log_space():
    m = third_order_chain(10, 10, seed=1)
    tiny = MarkovNetwork(m.domain, [Factor(f.variables, f.values - 500.0) for f in m.factors])
    a, b = infer(m), infer(tiny)
    assert b.log_z == pytest.approx(a.log_z - 500.0 * len(m.factors), rel=1e-12)
    np.testing.assert_allclose(a.marginal(("X0", "X9")).values, b.marginal(("X0", "X9")).values, atol=1e-12)


def test_disconnected_model_and_isolated_variable():
    d = Domain(("A", "B", "C", "D"), (2, 3, 2, 2))
    rng = np.random.default_rng(0)
    m = MarkovNetwork(d, [Factor(("A", "B"), rng.normal(size=(2, 3))), Factor(("C",), rng.normal(size=2))])
    cal = JunctionTree.build(d, m.scopes).calibrate(m)
    assert cal.log_z == pytest.approx(brute_log_z(m))
    np.testing.assert_allclose(cal.marginal(("D", "A")).values, brute_marginal(m, ("D", "A")), atol=1e-12)


def test_memory_budget_raises_or_falls_back():
    g = grid(12, 12, seed=0)
    with pytest.raises(JunctionTreeTooLarge, match="max_cells"):
        JunctionTree.build(g.domain, g.scopes, max_cells=1000)
    with pytest.raises(JunctionTreeTooLarge):
        infer(g, method="junction_tree", max_cells=1000)
    res = infer(g, max_cells=1000)
    assert res.method == "loopy" and "fell back" in res.note


def test_zero_probability_model_is_an_error():
    d = Domain(("A",), (2,))
    m = MarkovNetwork(d, [Factor(("A",), np.array([-np.inf, -np.inf]))])
    with pytest.raises(ValueError, match="zero probability"):
        infer(m)


def test_model_validation():
    d = Domain(("A", "B"), (2, 2))
    with pytest.raises(ValueError, match="needs shape"):
        MarkovNetwork(d, [Factor(("A", "B"), np.zeros((2, 3)))])
    with pytest.raises(ValueError, match="unknown variables"):
        MarkovNetwork(d, [Factor(("A", "Z"), np.zeros((2, 2)))])
    with pytest.raises(ValueError, match="NaN"):
        MarkovNetwork(d, [Factor(("A",), np.array([0.0, np.nan]))])


@settings(max_examples=40, deadline=None)
@given(small_markov_networks())
def test_scaled_and_log_space_schedules_agree(model):
    import ppgm.inference.junction_tree as jtm

    jt = JunctionTree.build(model.domain, model.scopes)
    saved = jtm.SCALED_RANGE, jtm.SCALED_MIN_CELLS, jtm.DENSE_PARENT
    try:
        jtm.SCALED_RANGE, jtm.SCALED_MIN_CELLS = np.inf, 0  # every tree takes the scaled schedule
        fast = jt.calibrate(model)
        jtm.DENSE_PARENT = 1  # every table summed and multiplied by the BLAS steps of large cliques
        steps = jt.calibrate(model)
    finally:
        jtm.SCALED_RANGE, jtm.SCALED_MIN_CELLS, jtm.DENSE_PARENT = saved
    slow = jt._calibrate_log(np.concatenate([p.ravel() for p in jt._potentials(model)]))
    assert fast._probs is not None and "flat_logs" in slow._cache  # each schedule ran
    for cal in (fast, steps):
        assert cal.log_z == pytest.approx(slow.log_z, rel=1e-12, abs=1e-10)
        for a, b in zip(cal.beliefs, slow.beliefs):
            np.testing.assert_allclose(a, b, atol=1e-12)


def test_extreme_potentials_use_log_space_and_stay_exact():
    d = Domain(("A", "B"), (2, 2))
    m = MarkovNetwork(d, [
        Factor(("A",), np.array([0.0, -800.0])),   # A=1 is e^-800 less likely ...
        Factor(("A", "B"), np.array([[-np.inf, -np.inf], [0.0, 1000.0]])),  # ... unless B forces it
    ])
    res = infer(m)
    assert "flat_logs" in res.calibration._cache  # the log-space schedule ran
    assert res.log_z == pytest.approx(np.logaddexp(-800.0, 200.0))
    np.testing.assert_allclose(res.marginal(("A",)).values, [0.0, 1.0])
    np.testing.assert_allclose(res.marginal(("B",)).values, [np.exp(-1000.0), 1.0], atol=1e-300)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks())
def test_flat_calibration_is_the_table_calibration(model):
    """calibrate_flat (the learners' layout, checked in vector operations) against calibrate_potentials
    and enumeration, on potentials of any scale and with hard zeros."""
    jt = JunctionTree.build(model.domain, model.scopes)
    psi = jt._potentials(model)
    a = jt.calibrate_potentials(psi)
    b = jt.calibrate_flat(np.concatenate([p.ravel() for p in psi]))
    assert b.log_z == pytest.approx(brute_log_z(model), abs=1e-9, rel=1e-12)
    assert a.log_z == b.log_z
    for x, y in zip(a.beliefs, b.beliefs):
        np.testing.assert_array_equal(x, y)


def _chain_with_tables(tables):
    """A chain A - B - C - D of 3-state variables with the given (A, B), (B, C), (C, D) log-potentials."""
    dom = Domain(("A", "B", "C", "D"), (3, 3, 3, 3))
    return MarkovNetwork(dom, [Factor(s, t) for s, t in zip((("A", "B"), ("B", "C"), ("C", "D")), tables)])


def test_scaled_schedule_beyond_the_range_bound_checks_its_products():
    """Finite potentials whose log-ranges add up to more than SCALED_RANGE still take the scaled schedule
    when no product of a table and its messages underflows (each clique's smallest cell is checked), and
    fall back to log space when one does. Both against enumeration in log space."""
    eye = np.eye(3)
    # ranges 500 + 200 + 2: above the bound, but every message is flat over B and C, so no product passes 500
    fits = _chain_with_tables([500 * eye, 200 * eye, np.arange(9.0).reshape(3, 3) / 4])
    # B = 0 is e^-800 less likely in one table and e^800 more likely in the next: exp(psi - max) is 0 there
    # in both, so the scaled products are zero everywhere, though B = 0 is as likely as the other states
    cancel = _chain_with_tables([np.array([[-800.0, 0, 0]] * 3), np.array([[800.0] * 3, [0] * 3, [0] * 3]), np.zeros((3, 3))])
    for model, scaled in ((fits, True), (cancel, False)):
        jt = JunctionTree.build(model.domain, model.scopes)
        psi = np.concatenate([p.ravel() for p in jt._potentials(model)])
        plan = jt._plan()
        tops, lows = np.maximum.reduceat(psi, plan["starts"]), np.minimum.reduceat(psi, plan["starts"])
        assert float((tops - lows).sum()) > SCALED_RANGE
        for cal in (jt.calibrate_flat(psi), jt.calibrate_flat(psi.copy(), overwrite=True)):  # the fallback reads psi
            assert ("flat_logs" not in cal._cache) == scaled
            assert cal.log_z == pytest.approx(brute_log_z(model), rel=1e-13)
            for scope in model.scopes:
                np.testing.assert_allclose(cal.marginal(scope).values, brute_marginal(model, scope), atol=1e-13)
    bounds = zip(plan["starts"], plan["sizes"], plan["shapes"])
    E = np.exp(psi - np.repeat(tops, plan["sizes"]))
    with pytest.raises(ValueError, match="zero probability"):  # what the unchecked scaled schedule would say
        jt._calibrate_scaled([E[a:a + n].reshape(sh) for a, n, sh in bounds], tops.tolist())
    # after a fallback the tree waits SCALED_WAIT calibrations in log space before it tries again
    import ppgm.inference.junction_tree as jtm
    again = jt.calibrate_flat(psi * 0.5)  # above the bound, and within range: the scaled schedule would do
    assert "flat_logs" in again._cache and plan["scaled_wait"] == jtm.SCALED_WAIT - 2  # (the overwriting call waited one)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 1500.0), st.floats(0.0, 1500.0), st.floats(0.0, 1500.0), st.integers(0, 2**31 - 1))
def test_flat_calibration_is_exact_at_any_range(s1, s2, s3, seed):
    """calibrate_flat against enumeration in log space on finite potentials of any log-range, whichever
    schedule it takes (scaled under the bound, scaled and checked above it, log space when a check fails)."""
    rng = np.random.default_rng(seed)
    model = _chain_with_tables([s * rng.random((3, 3)) for s in (s1, s2, s3)])
    jt = JunctionTree.build(model.domain, model.scopes)
    psi = np.concatenate([p.ravel() for p in jt._potentials(model)])
    kept = psi.copy()
    cal = jt.calibrate(model)
    scratch = jt.calibrate_flat(psi.copy(), overwrite=True)  # the caller's array may become the beliefs
    assert jt.calibrate_flat(psi).log_z == cal.log_z and np.array_equal(psi, kept)  # psi untouched without overwrite
    for c in (cal, scratch):
        assert c.log_z == pytest.approx(brute_log_z(model), rel=1e-12, abs=1e-12)
        for scope in model.scopes:
            np.testing.assert_allclose(c.marginal(scope).values, brute_marginal(model, scope), atol=1e-12)
        np.testing.assert_allclose(c.flat_beliefs, np.concatenate([b.ravel() for b in c.beliefs]), rtol=0, atol=0)


def test_flat_calibration_bad_input():
    d = Domain(("A", "B"), (2, 2))
    jt = JunctionTree.build(d, [("A", "B")])
    with pytest.raises(ValueError, match="psi: expected a flat vector of 4 clique cells"):
        jt.calibrate_flat(np.zeros(3))
    with pytest.raises(ValueError, match="psi: log-potentials must be finite or -inf"):
        jt.calibrate_flat(np.array([0.0, np.nan, 0.0, 0.0]))
    with pytest.raises(ValueError, match="psi: log-potentials must be finite or -inf"):
        jt.calibrate_flat(np.array([0.0, np.inf, 0.0, 0.0]))
    with pytest.raises(ValueError, match="zero probability"):
        jt.calibrate_flat(np.full(4, -np.inf))
    with pytest.raises(ValueError, match="psi: expected one table per clique"):
        jt.calibrate_potentials([np.zeros((2, 3))])


def test_batched_log_schedule_matches_the_per_clique_scaled_one_on_a_deep_tree():
    """The log-space schedule runs level by level over the whole tree; the scaled one clique by clique.
    On a random tree of 60 cliques (many levels, several children per parent) with a seventh of the cells
    at probability zero, both give the same log Z and clique marginals."""
    from ppgm.models.random_models import pairwise_dirichlet

    rng = np.random.default_rng(0)
    mn = pairwise_dirichlet([(int(rng.integers(0, i)), i) for i in range(1, 61)], 61, 4, seed=1)
    jt = JunctionTree.build(mn.domain, mn.scopes)
    assert len(jt._levels().levels) >= 5
    plan = jt._plan()
    psi = np.concatenate([p.ravel() for p in jt._potentials(mn)])
    psi[::7] = -np.inf
    tops = np.maximum.reduceat(psi, plan["starts"])
    E = np.exp(psi - np.repeat(tops, plan["sizes"]))
    scaled = jt._calibrate_scaled([E[a:a + n].reshape(sh) for a, n, sh in zip(plan["starts"], plan["sizes"], plan["shapes"])],
                                  tops.tolist())
    batched = jt._calibrate_log(psi)
    assert batched.log_z == pytest.approx(scaled.log_z, abs=1e-12)
    for a, b in zip(batched.beliefs, scaled.beliefs):
        np.testing.assert_allclose(a, b, atol=1e-13)
    np.testing.assert_allclose(batched.flat_beliefs, np.concatenate([b.ravel() for b in scaled.beliefs]), atol=1e-13)


def test_finite_log_schedule_matches_the_guarded_one_and_the_scaled_one():
    """All-finite log-potentials take a leaner log schedule (no -inf guards; plain += where a level's parent
    cells are distinct; no shift in the log-sum-exps when every value it can form is bounded). On the same
    deep tree, bounded or not, it agrees with the guarded schedule (the same input as one column) and with
    the per-clique scaled one, with levels of both kinds (distinct parents or not)."""
    from ppgm.models.random_models import pairwise_dirichlet

    rng = np.random.default_rng(0)
    mn = pairwise_dirichlet([(int(rng.integers(0, i)), i) for i in range(1, 61)], 61, 4, seed=1)
    jt = JunctionTree.build(mn.domain, mn.scopes)
    kinds = {L.distinct_parents for L in jt._levels().levels}
    assert kinds == {True, False}
    plan = jt._plan()
    base = np.concatenate([p.ravel() for p in jt._potentials(mn)])
    # x 5: a range the unshifted log-sum-exp could not take (the shifted one runs); x 0.1 and + 300: within it
    for psi, bounded in ((base * 5.0, False), (base * 0.1, True), (base * 0.1 + 300.0, True)):
        K, spread = len(jt.cliques), float(psi.max() - psi.min())
        assert (K * spread + float(np.log(plan["sizes"]).sum()) < SCALED_RANGE) == bounded
        fast = jt._calibrate_log(psi)
        lz, probs = jt.calibrate_columns(psi[:, None] + 0.0)
        assert fast.log_z == pytest.approx(float(lz[0]), rel=1e-14, abs=1e-11)
        np.testing.assert_allclose(fast.flat_beliefs, probs[:, 0], atol=1e-13)
        tops = np.maximum.reduceat(psi, plan["starts"])
        E = np.exp(psi - np.repeat(tops, plan["sizes"]))
        scaled = jt._calibrate_scaled([E[a:a + n].reshape(sh) for a, n, sh in zip(plan["starts"], plan["sizes"], plan["shapes"])],
                                      tops.tolist())
        assert fast.log_z == pytest.approx(scaled.log_z, rel=1e-14, abs=1e-11)
        np.testing.assert_allclose(fast.flat_beliefs, np.concatenate([b.ravel() for b in scaled.beliefs]), atol=1e-13)


def test_log_schedule_is_exact_when_one_clique_spans_thousands_of_nats():
    """A clique whose log-potentials span far more than exp's 709-nat range: each separator cell's
    log-sum-exp must be shifted by its own maximum, not the clique's (a clique-wide shift underflowed to
    log 0 = -inf and reported probability zero everywhere). Brute force in log space is the reference."""
    from conftest import brute_log_z, brute_marginal

    rng = np.random.default_rng(3)
    dom = Domain(("A", "B", "C", "D"), (3, 3, 2, 3))
    factors = [Factor(s, rng.normal(0, 1, dom.shape(s)) * 800) for s in (("A", "B"), ("B", "C"), ("B", "D"))]
    model = MarkovNetwork(dom, factors)
    cal = JunctionTree.build(dom, model.scopes).calibrate(model)
    assert "flat_logs" in cal._cache  # the range sends it to the log-space schedule
    assert cal.log_z == pytest.approx(brute_log_z(model), rel=1e-12)
    for scope in (("A", "B"), ("B", "C"), ("B", "D")):
        np.testing.assert_allclose(cal.marginal(scope).values, brute_marginal(model, scope), atol=1e-12)


def test_columns_calibrate_like_one_model_each_in_both_schedules():
    # calibrate_columns: a model under B evidence masks, by the scaled schedule (keep) and by the log
    # schedule ((cells, B) with -inf), against one calibrate_flat per column; a column that rules out a
    # whole clique has log Z = -inf; potentials spanning thousands of nats take the log schedule
    from ppgm.models.random_models import third_order_chain

    mn = third_order_chain(6, 3, seed=4)
    tree = JunctionTree.build(mn.domain, mn.scopes)
    psi = np.concatenate([p.ravel() for p in tree._potentials(mn)])
    rng = np.random.default_rng(5)
    keep = rng.random((psi.size, 6)) < 0.8
    first = tree._plan()["sizes"][0]
    keep[:first, 5] = False  # the first clique ruled out entirely
    for base in (psi, psi * 400.0):  # the second: a log-range far above SCALED_RANGE
        lz, b = tree.calibrate_columns(base, keep)
        lz_log, b_log = tree.calibrate_columns(np.where(keep, base[:, None], -np.inf))
        assert lz[5] == -np.inf and lz_log[5] == -np.inf
        for j in range(5):
            one = tree.calibrate_flat(np.where(keep[:, j], base, -np.inf))
            assert lz[j] == pytest.approx(one.log_z, rel=1e-12) and lz_log[j] == pytest.approx(one.log_z, rel=1e-12)
            np.testing.assert_allclose(b[:, j], one.flat_beliefs, atol=1e-12)
            np.testing.assert_allclose(b_log[:, j], one.flat_beliefs, atol=1e-12)
    with pytest.raises(ValueError, match="psi, keep"):
        tree.calibrate_columns(psi, keep[:-1])


def _tree_model(n, k, seed, extra_edges=()):
    """A random recursive tree (several children per level) whose potentials span a few nats."""
    rng = np.random.default_rng(seed)
    edges = [(int(rng.integers(0, i)), i) for i in range(1, n)] + list(extra_edges)
    return pairwise_dirichlet(edges, n, k, alpha=0.5, seed=seed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=5, max_card=3, max_scope=3, max_factors=5, allow_zeros=False))
def test_exact_fisher_product_is_the_covariance_of_the_clique_indicators(model):
    """F v from the tree's two passes, level by level and clique by clique, against the covariance of the
    junction tree's clique indicators, by enumeration (loopy graphs, several levels, forests, potentials of
    any scale); uncentred, the weighted cells and E[g] that give it."""
    jt = JunctionTree.build(model.domain, model.scopes)
    cal = jt.calibrate(model)
    mean_enum, cov = indicator_moments(model, jt.cliques)
    np.testing.assert_allclose(cal.flat_beliefs, mean_enum, atol=1e-10)
    v = np.random.default_rng(0).normal(size=jt.cells)
    for product in (jt.fisher, jt._fisher_levels, jt._fisher_cliques):
        np.testing.assert_allclose(product(cal.flat_beliefs)(v), cov @ v, atol=1e-10)
        w, mean = product(cal.flat_beliefs, centred=False)(v)  # uncentred: F v = w - E[g] mu
        np.testing.assert_allclose(w - mean * cal.flat_beliefs, cov @ v, atol=1e-10)
        assert mean == pytest.approx(float(mean_enum @ v), abs=1e-10)  # E[g] = sum over cliques <mu_C, v_C>


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=5, max_card=3, max_scope=3, max_factors=5, allow_zeros=False))
def test_fisher_product_with_parents_read_as_arrays_is_the_covariance(model):
    """The Fisher product's array paths for large cliques (forced here on every clique: broadcasts up,
    axis sums down by BLAS steps), level by level and clique by clique, against the enumerated
    covariance, forests (empty separators) included."""
    import ppgm.inference.junction_tree as jtm
    old = jtm.DENSE_PARENT
    jtm.DENSE_PARENT = 1
    try:
        jt = JunctionTree.build(model.domain, model.scopes)
        mu = jt.calibrate(model).flat_beliefs
        v = np.random.default_rng(0).normal(size=jt.cells)
        got = [jt._fisher_levels(mu)(v), jt._fisher_cliques(mu)(v)]
    finally:
        jtm.DENSE_PARENT = old
    assert len(jt.cliques) == 1 or any(jt._dense_parents())
    _, cov = indicator_moments(model, jt.cliques)
    for g in got:
        np.testing.assert_allclose(g, cov @ v, atol=1e-10)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=5, max_card=3, max_scope=3, max_factors=5, allow_zeros=False), st.booleans())
def test_passes_cut_in_halves_match_enumeration(model, blas_steps):
    """Every clique cut in two halves of its first axis (forced here; on trees of millions of cells the halves
    run side by side): the clique-by-clique Fisher product, centred and not, and the scaled calibration
    against enumeration, with the separators that hold the clique's first variable cut alike and those
    that do not summed from both halves (a stacked sum where it should be added, or the reverse, fails)."""
    import ppgm.inference.junction_tree as jtm
    old = jtm.SPLIT_CELLS, jtm.DENSE_PARENT
    jtm.SPLIT_CELLS, jtm.DENSE_PARENT = 1, 1 if blas_steps else old[1]
    try:
        jt = JunctionTree.build(model.domain, model.scopes)
        psi = np.concatenate([p.ravel() for p in jt._potentials(model)])
        cal = jt._calibrate_scaled([np.exp(p - p.max()) for p in jt._potentials(model)],
                                   [float(p.max()) for p in jt._potentials(model)])
        flat = jt.calibrate_flat(psi.copy(), overwrite=True)
        v = np.random.default_rng(0).normal(size=jt.cells)
        fv = jt._fisher_cliques(flat.flat_beliefs)(v)
        w, mean = jt._fisher_cliques(flat.flat_beliefs, centred=False)(v)
        cut = any(len(jtm._row_halves(sh)) == 2 for sh in jt._plan()["shapes"])
    finally:
        jtm.SPLIT_CELLS, jtm.DENSE_PARENT = old
    assert cut or all(model.domain.card(c[0]) < 2 for c in jt.cliques if c)
    mean_enum, cov = indicator_moments(model, jt.cliques)
    for c in (cal, flat):
        assert c.log_z == pytest.approx(brute_log_z(model), abs=1e-10, rel=1e-12)
        np.testing.assert_allclose(np.concatenate([b.ravel() for b in c.beliefs]), mean_enum, atol=1e-12)
    np.testing.assert_allclose(fv, cov @ v, atol=1e-10)
    np.testing.assert_allclose(w - mean * flat.flat_beliefs, cov @ v, atol=1e-10)
    assert mean == pytest.approx(float(mean_enum @ v), abs=1e-10)


def test_two_sides_cover_every_cell_once_in_balance():
    """The exp's stretches for two threads: every cell in exactly one stretch with its clique's value, a large
    clique cut in two, the sides' cells within the smallest clique of each other."""
    import ppgm.inference.junction_tree as jtm
    sizes = [jtm.SPLIT_CELLS * 3, 1000, jtm.SPLIT_CELLS - 1, 7, jtm.SPLIT_CELLS + 1]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    sides = jtm._two_sides(starts, sizes, list(range(len(sizes))))
    owner = np.full(sum(sizes), -1)
    for side in sides:
        for lo, hi, v in side:
            assert (owner[lo:hi] == -1).all()
            owner[lo:hi] = v
    np.testing.assert_array_equal(owner, np.repeat(np.arange(len(sizes)), sizes))
    loads = [sum(hi - lo for lo, hi, _ in side) for side in sides]
    assert len(sides) == 2 and abs(loads[0] - loads[1]) <= jtm.SPLIT_CELLS
    assert len(jtm._two_sides(starts[1:4], sizes[1:4], [0, 1, 2])) == 1  # no large clique: one side


def test_fisher_product_array_path_matches_the_gathered_one_on_a_deep_tree(monkeypatch):
    """Several children per parent at many levels: the levels' array and index-array paths and the
    clique-by-clique product (with and without BLAS steps) agree."""
    import ppgm.inference.junction_tree as jtm
    model = _tree_model(200, 4, 3, extra_edges=[(0, 5), (3, 9), (10, 40)])
    out = []
    for threshold in (1, 10**12):
        monkeypatch.setattr(jtm, "DENSE_PARENT", threshold)
        jt = JunctionTree.build(model.domain, model.scopes)
        mu = jt.calibrate_flat(np.random.default_rng(1).normal(size=jt.cells)).flat_beliefs
        v = np.random.default_rng(5).normal(size=jt.cells)
        for product in (jt._fisher_levels(mu), jt._fisher_cliques(mu)):
            out.append(product(v))
            assert np.array_equal(v, np.random.default_rng(5).normal(size=jt.cells))  # the caller's v untouched
            scratch = v.copy()
            assert product(scratch, overwrite=True) is scratch  # the result in the scratch array's memory
            np.testing.assert_array_equal(scratch, out[-1])
        assert any(jt._dense_parents()) == (threshold == 1)
    for o in out[1:]:
        np.testing.assert_allclose(o, out[0], atol=1e-13)


@pytest.mark.parametrize("seed", range(4))
def test_inverse_fisher_inverts_the_fisher_on_consistent_directions(seed):
    """F J v = v for every consistent change v of the clique marginals (brute-force F), on trees and
    forests with several children per level; J is symmetric positive semi-definite; with a ridge it
    approaches the inverse of F + ridge where cells are rare."""
    rng = np.random.default_rng(seed)
    model = _tree_model(7, 3, seed) if seed % 2 == 0 else pairwise_dirichlet([(0, 1), (1, 2), (1, 3), (4, 5), (4, 6)], 7, 3, alpha=0.5, seed=seed)
    jt = JunctionTree.build(model.domain, model.scopes)
    mu = jt.calibrate(model).flat_beliefs
    _, F = indicator_moments(model, jt.cliques)
    J = np.column_stack([jt.inverse_fisher(mu)(e) for e in np.eye(jt.cells)])
    np.testing.assert_allclose(J, J.T, atol=1e-9)
    assert np.linalg.eigvalsh((J + J.T) / 2).min() > -1e-8
    for _ in range(3):  # consistent directions: differences of two models' clique marginals on this tree
        other = MarkovNetwork(model.domain, [Factor(f.variables, rng.normal(size=f.values.shape)) for f in model.factors])
        v = jt.calibrate(other).flat_beliefs - mu
        np.testing.assert_allclose(F @ (J @ v), v, atol=1e-9)
    # an inconsistent direction is not inverted (J is not F's inverse everywhere: the gauge is F's null space)
    w = rng.normal(size=jt.cells)
    assert np.abs(F @ (J @ w) - w).max() > 1e-3


def test_fisher_product_on_a_deep_tree_agrees_with_central_differences():
    """A tree of 300 cliques (more than ten levels, too large to enumerate) against central differences
    of two calibrations: the exact product agrees to the differences' own accuracy."""
    model = _tree_model(300, 4, 5)
    jt = JunctionTree.build(model.domain, model.scopes)
    rng = np.random.default_rng(1)
    psi = rng.normal(size=jt.cells)
    v = rng.normal(size=jt.cells)
    mu = jt.calibrate_flat(psi).flat_beliefs
    h = 1e-5
    central = (jt.calibrate_flat(psi + h * v).flat_beliefs - jt.calibrate_flat(psi - h * v).flat_beliefs) / (2 * h)
    assert len(jt._levels().levels) > 10
    for product in (jt._fisher_levels, jt._fisher_cliques):
        np.testing.assert_allclose(product(mu)(v), central, atol=1e-8)


def test_fisher_product_stays_finite_where_a_separator_cell_is_subnormal():
    """A separator state of probability about 1e-320 (a subnormal float, whose inverse overflows): the
    product leaves it out of its conditional expectations (every cell it reaches is as improbable), so
    it stays finite and exact to the enumeration's accuracy."""
    d = Domain(("A", "B", "C", "D"), (2, 2, 2, 2))
    rare = np.array([[0.0, -737.0], [0.0, -737.0]])  # B = 1 costs 737 nats: p(B = 1) is about 1e-320
    model = MarkovNetwork(d, [Factor(("A", "B"), rare), Factor(("B", "C"), np.array([[0.3, -0.2], [0.1, 0.4]])),
                              Factor(("C", "D"), np.array([[0.5, 0.0], [-0.3, 0.2]]))])
    jt = JunctionTree.build(d, model.scopes)
    mu = jt.calibrate(model).flat_beliefs
    assert 0 < mu.min() < np.finfo(float).tiny  # a subnormal belief
    _, cov = indicator_moments(model, jt.cliques)
    v = np.random.default_rng(0).normal(size=jt.cells) * 1e4
    for product in (jt._fisher_levels, jt._fisher_cliques):
        got = product(mu)(v)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, cov @ v, atol=1e-9)


def _random_tree_network(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return pairwise_dirichlet([(int(rng.integers(0, i)), i) for i in range(1, n)], n, 3, seed=seed)


@pytest.mark.parametrize("n, seed", [(2, 0), (3, 1), (12, 2), (40, 3), (41, 4)])
def test_batched_schedule_is_rooted_at_a_centre_of_the_clique_tree(n, seed):
    """The batched schedule's levels run from a centre (the fewest levels any root gives); the tree's
    own root and parent links, which sampling uses, are left as built."""
    import networkx as nx

    mn = _random_tree_network(n, seed)
    jt = JunctionTree.build(mn.domain, mn.scopes)
    g = nx.Graph([(c, p) for c, p in enumerate(jt.parent) if p >= 0])
    g.add_nodes_from(range(len(jt.cliques)))
    lv, own = jt._levels(), jt._levels(centre=False)
    assert lv.root in nx.center(g)
    assert len(lv.levels) == nx.eccentricity(g, lv.root) == min(nx.eccentricity(g).values())
    assert own.root == jt.order[0] and len(own.levels) == nx.eccentricity(g, jt.order[0])
    assert len(lv.levels) <= len(own.levels)


def test_flat_calibration_bad_input_deep_in_a_batched_tree():
    """The batched schedule checks its input only when the root's log Z is not finite: NaN and +inf in a
    leaf must still be reported as bad input, and a model with no configuration as such."""
    mn = _random_tree_network(30, 5)
    jt = JunctionTree.build(mn.domain, mn.scopes)
    psi = np.concatenate([p.ravel() for p in jt._potentials(mn)])
    leaf = max(range(len(jt.cliques)), key=lambda i: jt.order.index(i))  # the last clique reached from the root
    a = int(jt._plan()["starts"][leaf])
    for bad in (np.nan, np.inf):
        x = psi.copy()
        x[a + 1] = bad
        with pytest.raises(ValueError, match="psi: log-potentials must be finite or -inf"):
            jt.calibrate_flat(x)
    x = psi.copy()
    x[a:a + int(jt._plan()["sizes"][leaf])] = -np.inf
    with pytest.raises(ValueError, match="zero probability"):
        jt.calibrate_flat(x)
    assert not jt._plan()["scaled_shape"]  # the case under test: the batched log schedule
    cal, plan = jt.calibrate_flat(psi), jt._plan()  # and on good input it is the per-clique scaled schedule's answer
    tops = np.maximum.reduceat(psi, plan["starts"])
    E = np.exp(psi - np.repeat(tops, plan["sizes"]))
    ref = jt._calibrate_scaled([E[a:a + n].reshape(sh) for a, n, sh in zip(plan["starts"], plan["sizes"], plan["shapes"])],
                               tops.tolist())
    assert cal.log_z == pytest.approx(ref.log_z, abs=1e-11)
    np.testing.assert_allclose(cal.flat_beliefs, np.concatenate([b.ravel() for b in ref.beliefs]), atol=1e-13)
