"""The result of calibrating a model on a junction tree: clique beliefs, log Z, and the queries
answered from them (a clique's or separator's table summed onto the scope, or the smallest subtree
that connects variables no clique holds together)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable, Hashable, Protocol, Sequence

import numpy as np

from ..factors.cell_map import sum_plan
from ..factors.domain import Domain
from ..factors.factor import Factor, align, logsumexp
from .tree_size import DEFAULT_MAX_CELLS, JunctionTreeTooLarge


class Tree(Protocol):
    """What a calibration reads of its junction tree (``ppgm.JunctionTree`` is one): the cliques, the
    rooted tree over them with its separators, and the tree's lookups of a query's table."""

    @property
    def domain(self) -> Domain: ...

    @property
    def cliques(self) -> tuple: ...

    @property
    def parent(self) -> tuple: ...

    @property
    def order(self) -> tuple: ...

    @property
    def separators(self) -> tuple: ...

    @property
    def children(self) -> tuple: ...

    def find_home(self, scope: Sequence[Hashable]) -> int | None: ...

    def home(self, scope: Sequence[Hashable]) -> int: ...

    def _smallest_holder(self, scope: tuple) -> tuple[int, bool, Callable] | None: ...

    def _plan(self) -> dict: ...


def _lse_onto(values: np.ndarray, scope: Sequence, keep: Sequence) -> np.ndarray:
    axes = tuple(i for i, v in enumerate(scope) if v not in keep)
    out = logsumexp(values, axis=axes) if axes else values
    kept = [v for v in scope if v in keep]
    return np.transpose(out, [kept.index(v) for v in keep]) if kept != list(keep) else out


@dataclass(frozen=True)
class Calibration:
    """The result of calibrating a model on a junction tree.

    Attributes
    ----------
    tree : JunctionTree
        (any :class:`Tree`)
    log_z : float
        Log partition function of the calibrated model.
    beliefs, log_beliefs : tuple of arrays
        Normalised marginal (or its log) of each clique, axes as ``tree.cliques``; whichever the
        calibration did not produce is derived on first use.

    Parameters
    ----------
    tree : JunctionTree
    log_z : float
        log of the partition function.

    Examples
    --------
    >>> from ppgm import JunctionTree
    >>> from ppgm.models.random_models import third_order_chain
    >>> m = third_order_chain(6, 3, seed=0)
    >>> cal = JunctionTree.build(m.domain, m.scopes).calibrate(m)
    >>> cal.marginal(("X0", "X5")).values.shape   # an out-of-clique query
    (3, 3)
    """

    tree: Tree
    log_z: float
    _probs: tuple | None = field(default=None, repr=False)
    _logs: tuple | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def beliefs(self) -> tuple:
        if self._probs is not None:
            return self._probs
        if "probs" not in self._cache:
            if "flat_logs" in self._cache:
                self._cache["probs"] = self._split(self.flat_beliefs)
            else:
                self._cache["probs"] = tuple(np.exp(b) for b in self._logs or ())
        return self._cache["probs"]

    def _split(self, flat: np.ndarray) -> tuple:
        plan = self.tree._plan()
        return tuple(flat[a:a + n].reshape(sh) for a, n, sh in zip(plan["starts"], plan["sizes"], plan["shapes"]))

    @property
    def flat_beliefs(self) -> np.ndarray:
        """The clique beliefs concatenated (each ravelled in C order, cliques in the tree's order)."""
        if "flat" not in self._cache:
            logs = self._cache.get("flat_logs")
            self._cache["flat"] = np.exp(logs) if logs is not None else np.concatenate([b.ravel() for b in self.beliefs])
        return self._cache["flat"]

    @property
    def log_beliefs(self) -> tuple:
        if self._logs is not None:
            return self._logs
        if "logs" not in self._cache and "flat_logs" in self._cache:
            self._cache["logs"] = self._split(self._cache["flat_logs"])
        if "logs" not in self._cache:
            with np.errstate(divide="ignore"):
                self._cache["logs"] = tuple(np.log(b) for b in self._probs or ())
        return self._cache["logs"]

    def clique_marginals(self) -> list[Factor]:
        """The probability table of every clique.

        Returns
        -------
        list of Factor

        Examples
        --------
        >>> from ppgm import Domain, JunctionTree, MarkovNetwork
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> [round(float(f.values.sum()), 12) for f in jt.calibrate(m).clique_marginals()]
        [1.0, 1.0]
        """
        return [Factor(c, b) for c, b in zip(self.tree.cliques, self.beliefs)]

    def separator_marginals(self) -> dict:
        """The probability table of every separator.

        Returns
        -------
        dict
            ``{(child clique, parent clique): Factor}``.

        Examples
        --------
        >>> from ppgm import Domain, JunctionTree, MarkovNetwork
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> [f.variables for f in jt.calibrate(m).separator_marginals().values()]
        [('B',)]
        """
        t = self.tree
        return {(i, t.parent[i]): self._separator(i) for i in t.order[1:]}

    def _separator(self, i: int) -> Factor:
        """The probability table of clique i's separator, summed from its clique once per calibration
        (queries inside a separator sum it instead of the larger clique)."""
        key = ("separator", i)
        if key not in self._cache:
            t = self.tree
            axes = t._plan()["child_sum"][i]
            table = self.beliefs[i].sum(axis=axes) if axes else self.beliefs[i]
            self._cache[key] = Factor._unchecked(t.separators[i], table)  # separators keep the clique's (domain) order
        return self._cache[key]

    def log_marginal(self, variables: Sequence[Hashable]) -> Factor:
        """The log-probability table over ``variables``: read off a clique that holds them, or (for
        variables spread over several cliques) from the smallest subtree that connects them.

        Parameters
        ----------
        variables : sequence

        Returns
        -------
        Factor

        Examples
        --------
        >>> from ppgm import Domain, JunctionTree, MarkovNetwork
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> np.exp(jt.calibrate(m).log_marginal(["A"]).values).round(2).tolist()
        [0.3, 0.7]
        """
        variables = self.tree.domain.check(variables)
        key = variables
        if key in self._cache:
            return self._cache[key]
        t = self.tree
        i = t.find_home(variables)
        if i is not None:
            out = Factor(variables, _lse_onto(self.log_beliefs[i], t.cliques[i], variables))
        else:
            out = self._out_of_clique(variables)
        out = out.normalized_log()
        self._cache[key] = out
        return out

    def marginal(self, variables: Sequence[Hashable]) -> Factor:
        """The probability table over ``variables`` (see :meth:`log_marginal`).

        Parameters
        ----------
        variables : sequence

        Returns
        -------
        Factor

        Examples
        --------
        >>> from ppgm import Domain, JunctionTree, MarkovNetwork
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> jt.calibrate(m).marginal(["A", "C"]).values.shape
        (2, 2)
        """
        return self._marginal(self.tree.domain.check(variables))

    def _marginal(self, variables: tuple) -> Factor:
        """:meth:`marginal` of checked variables (a tuple of distinct names of the domain)."""
        if self._probs is not None:
            held = self.tree._smallest_holder(variables)
            if held is not None:  # a clique or a separator holds them: sum the smallest such table onto them
                j, is_separator, onto = held
                table = self._separator(j).values if is_separator else self._probs[j]
                f = onto(table)  # sums to one up to rounding: each clique's belief was normalised by its own sum
                return Factor._unchecked(variables, f if len(variables) < table.ndim else f.copy())  # never a view of the beliefs
        i = self.tree.find_home(variables)
        if i is None:  # out of clique: contract the probability tables
            f = self._out_of_clique(variables, log=False).transpose(variables)
            total = f.values.sum()
            if total > 0:
                return Factor(variables, f.values / total)
            # everything underflowed: the log-space path is exact
        f = self.log_marginal(variables)
        return Factor(f.variables, np.exp(f.values))

    def marginals(self, scopes: Sequence[Sequence[Hashable]]) -> list[Factor]:
        """The probability tables of many scopes at once (each as :meth:`marginal` gives it, axes in
        the scope's order), sharing the work between them.

        Each clique's table is summed once per set of variables the queries need from it, starting
        from the smallest such sum already made. A scope no clique holds is answered by sum-product
        over the tree below the deepest clique whose subtree holds it: the message from a clique to
        its parent is the conditional table of the query's variables that live below it given its
        separator, computed once for every query with the same variables there (a triple's message
        from the branch holding one of its variables serves every triple with that variable).

        Parameters
        ----------
        scopes : sequence of sequences
            Each a tuple of distinct variables of the domain.

        Returns
        -------
        list of Factor

        Examples
        --------
        >>> from ppgm import JunctionTree
        >>> from ppgm.models.random_models import third_order_chain
        >>> m = third_order_chain(6, 3, seed=0)
        >>> cal = JunctionTree.build(m.domain, m.scopes).calibrate(m)
        >>> one = [cal.marginal(s).values for s in [("X0", "X5"), ("X2",), ("X1", "X4", "X3")]]
        >>> many = cal.marginals([("X0", "X5"), ("X2",), ("X1", "X4", "X3")])
        >>> all(bool(np.allclose(a, b.values)) for a, b in zip(one, many))
        True
        """
        batch = _Batch(self)
        queries = [self.tree.domain.check(s) for s in scopes]
        for q in queries:  # what each query needs of the cliques, then every clique's sums at once
            batch.plan(q)
        batch.sum_cliques()
        out = []
        for q in queries:
            values = batch.marginal(q)
            total = values.sum()
            if not total > 0:  # everything underflowed: the log-space path is exact
                out.append(self.marginal(q))
                continue
            out.append(Factor._unchecked(q, values / total))
        return out

    def _subtree(self, q: set) -> tuple[list, set]:
        """The smallest subtree whose cliques hold the query variables, in the tree's order."""
        t = self.tree
        nodes = set(range(len(t.cliques)))
        nbrs: dict = {i: set() for i in nodes}
        for i in t.order[1:]:
            nbrs[i].add(t.parent[i])
            nbrs[t.parent[i]].add(i)
        changed = True
        while changed:  # prune leaves whose query variables also live in their neighbour
            changed = False
            for i in sorted(nodes):
                live = nbrs[i] & nodes
                if len(nodes) > 1 and len(live) <= 1:
                    nb = next(iter(live), None)
                    if nb is None or (q & set(t.cliques[i])) <= set(t.cliques[nb]):
                        nodes.discard(i)
                        changed = True
        return [i for i in t.order if i in nodes], nodes

    def _out_of_clique(self, variables: tuple, log: bool = True) -> Factor:
        """Sum-product over the query's subtree: each clique's belief is first reduced to the query's
        variables and the subtree's separators it holds, divided by its separator's belief, times
        its children's messages. ``log``: in log space (exact for any range); otherwise with the
        probability tables (every entry at most one, so nothing overflows; entries below ~1e-300
        underflow), several times faster, and the reduced clique tables are kept for later queries."""
        t = self.tree
        q = set(variables)
        sub_order, nodes = self._subtree(q)
        root = sub_order[0]
        msgs: dict = {}
        for i in reversed(sub_order):
            clique = t.cliques[i]
            kids = [c for c in t.children[i] if c in nodes]
            need = q.union(*(t.separators[c] for c in kids))
            if i != root:
                need |= set(t.separators[i])
            keep = tuple(v for v in clique if v in need)
            key = ("reduced", i, keep, i != root)
            if log:
                f = Factor(keep, _lse_onto(self.log_beliefs[i], clique, keep))
            elif key in self._cache:
                f = Factor(keep, self._cache[key])
            else:
                axes = tuple(k for k, v in enumerate(clique) if v not in need)
                f = Factor(keep, self.beliefs[i].sum(axis=axes) if axes else self.beliefs[i])
            if i != root and (log or key not in self._cache):  # divide by the separator's belief (its variables are all kept)
                seps = t.separators[i]
                if log:
                    sep = align(_lse_onto(f.values, keep, seps), seps, keep)
                    with np.errstate(invalid="ignore"):
                        f = Factor(keep, np.where(np.isneginf(sep), -np.inf, f.values - sep))
                else:
                    sep = align(f.sum_to(seps).transpose(seps).values, seps, keep)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        f = Factor(keep, np.where(sep > 0, f.values / np.where(sep > 0, sep, 1.0), 0.0))
            if not log and key not in self._cache:  # kept while the kept tables stay within the tree's own size
                held = self._cache.get("reduced_cells", 0) + f.values.size
                if held <= sum(b.size for b in self.beliefs):
                    self._cache[key] = f.values
                    self._cache["reduced_cells"] = held
            ms = [msgs.pop(c) for c in kids]
            scope = set(f.variables).union(*(m.variables for m in ms))
            out = list(variables) if i == root else [v for v in f.variables if v in q or v in t.separators[i]] + [
                v for v in scope if v in q and v not in f.variables]
            if log:
                for m in ms:
                    cells = t.domain.size(set(f.variables) | set(m.variables))
                    if cells > DEFAULT_MAX_CELLS:
                        raise JunctionTreeTooLarge(
                            f"variables: the out-of-clique query over {len(variables)} variables needs an "
                            f"intermediate table of {cells:,} cells; query fewer variables at once"
                        )
                    f = f + m
                msgs[i] = f.logsumexp_to(out)
            else:  # product and sum in one contraction (BLAS where it can), no full product table
                label = {v: k for k, v in enumerate(scope)}
                args = [x for g in [f, *ms] for x in (g.values, [label[v] for v in g.variables])]
                msgs[i] = Factor(tuple(out), np.einsum(*args, [label[v] for v in out], optimize=len(ms) > 1))
            if i == root:
                return msgs[i]
        raise AssertionError("unreachable")  # pragma: no cover


class _Batch:
    """:meth:`Calibration.marginals`' shared work: the clique tables' sums (per clique, keyed by the
    set of variables kept, axes in the clique's order) and the messages between neighbouring cliques
    (per directed edge and set of query variables carried)."""

    def __init__(self, cal: Calibration):
        t = cal.tree
        self.tree, self.probs = t, cal.beliefs
        self.order = {v: k for k, v in enumerate(t.domain.variables)}
        self.cset = [frozenset(c) for c in t.cliques]
        below = [set(c) for c in t.cliques]  # the variables of each clique's subtree
        for i in reversed(t.order):
            if t.parent[i] >= 0:
                below[t.parent[i]] |= below[i]
        everything = frozenset(t.domain.variables)
        # the tree's edges both ways: the neighbour, the separator, the variables on the neighbour's side
        self.edges: list[list] = [[] for _ in t.cliques]
        for c in t.order[1:]:
            p, sep = t.parent[c], frozenset(t.separators[c])
            self.edges[p].append((c, sep, frozenset(below[c])))
            self.edges[c].append((p, sep, (everything - frozenset(below[c])) | sep))
        self.sums: list[dict] = [{} for _ in t.cliques]
        self.messages: dict = {}
        self.needs: list[set] = [set() for _ in t.cliques]
        self.planned: set = set()

    def plan(self, q: tuple) -> None:
        """Record the sums of the cliques' tables that answering ``q`` will read."""
        t, qs = self.tree, frozenset(q)
        held = t._smallest_holder(q)
        if held is not None:
            j, on_separator, _ = held
            self.needs[j].add(frozenset(t.separators[j]) if on_separator else qs)
            return
        r = self._root(q)
        incoming = self._incoming(r, qs)
        self.needs[r].add(frozenset(qs & self.cset[r]).union(*(s for _, s, _ in incoming)))
        for k, _, carried in incoming:
            self._plan_message(k, r, carried)

    def _plan_message(self, i: int, j: int, q: frozenset) -> None:
        if (i, j, q) in self.planned:
            return
        self.planned.add((i, j, q))
        sep = next(s for k, s, _ in self.edges[i] if k == j)
        incoming = self._incoming(i, q, away=j)
        self.needs[i].add(frozenset((q & self.cset[i]) | sep).union(*(s for _, s, _ in incoming)))
        if sep:
            self.needs[i].add(sep)
        for k, _, carried in incoming:
            self._plan_message(k, i, carried)

    def sum_cliques(self) -> None:
        """Every planned sum of every clique's table (:func:`_lattice_sums`)."""
        for i, needs in enumerate(self.needs):
            if needs:
                _lattice_sums(self.tree.cliques[i], self.probs[i], needs, self.sums[i])

    def reduce(self, i: int, need: frozenset) -> tuple[tuple, np.ndarray]:
        """Clique i's table summed onto ``need`` (variables in the clique's order), from the smallest
        sum of it already made that holds ``need``."""
        done = self.sums[i]
        got = done.get(need)
        if got is not None:
            return got
        variables, table = self.tree.cliques[i], self.probs[i]
        for held, (vs, t) in done.items():
            if need <= held and t.size < table.size:
                variables, table = vs, t
        keep = tuple(k for k, v in enumerate(variables) if v in need)
        out = (tuple(variables[k] for k in keep),
               table if len(keep) == len(variables) else sum_plan(table.shape, keep)(table))
        done[need] = out
        return out

    def _incoming(self, i: int, q: frozenset, away: int = -1) -> list:
        """The neighbours of clique i (other than ``away``) on whose side some variable of ``q`` lives
        outside their separator with i, with the variables each message carries."""
        return [(k, sep, carried) for k, sep, side in self.edges[i] if k != away and (carried := (q & side) - sep)]

    def _contract(self, i: int, table: tuple, incoming: list, out: tuple) -> np.ndarray:
        """``table`` (a sum of clique i's) times the messages ``incoming`` into i, summed onto ``out``."""
        labels: dict = {}
        args: list = [table[1], [labels.setdefault(v, len(labels)) for v in table[0]]]
        size = table[1].size
        for k, _, carried in incoming:
            vs, m = self.message(k, i, carried)
            args += [m, [labels.setdefault(v, len(labels)) for v in vs]]
            size *= int(np.prod([n for v, n in zip(vs, m.shape) if v not in table[0]]))
        if len(args) == 2 and out == table[0]:
            return table[1]
        # large contractions by BLAS (einsum's planned path); small ones in one loop, without its planning
        return np.einsum(*args, [labels[v] for v in out], optimize=size > BLAS_CELLS)

    def message(self, i: int, j: int, q: frozenset) -> tuple[tuple, np.ndarray]:
        """The conditional table, given the separator of cliques i and j, of the variables ``q`` that
        live on i's side of it: axes the separator's variables in the clique's order, then ``q``'s."""
        key = (i, j, q)
        got = self.messages.get(key)
        if got is not None:
            return got
        sep = next(s for k, s, _ in self.edges[i] if k == j)
        incoming = self._incoming(i, q, away=j)
        vs, joint = self.reduce(i, frozenset((q & self.cset[i]) | sep).union(*(s for _, s, _ in incoming)))
        if sep:
            marg = self.reduce(i, sep)[1]
            den = marg.reshape([n if v in sep else 1 for v, n in zip(vs, joint.shape)])
            with np.errstate(invalid="ignore", divide="ignore"):
                joint = np.where(den > 0, joint / np.where(den > 0, den, 1.0), 0.0)
        out = tuple(v for v in vs if v in sep or v in q)
        out += tuple(sorted(q - frozenset(out), key=self.order.__getitem__))
        got = (out, self._contract(i, (vs, joint), incoming, out))
        self.messages[key] = got
        return got

    def _root(self, q: tuple) -> int:
        """Where an out-of-clique query is answered: the smallest clique holding the most of its
        variables, those left out (carried in by messages) with the fewest states; any variable's
        smallest clique for queries of more than four variables."""
        t = self.tree
        if len(q) <= 4:
            cards = t.domain.cards
            for k in range(len(q) - 1, 0, -1):
                best = None
                for sub in combinations(q, k):
                    home = t.find_home(sub)
                    if home is not None:
                        rest = int(np.prod([cards[self.order[v]] for v in q if v not in sub]))
                        if best is None or rest < best[0]:
                            best = (rest, home)
                if best is not None:
                    return best[1]
        return t.home(q[:1])

    def marginal(self, q: tuple) -> np.ndarray:
        """The (unnormalised) table over ``q``, axes in ``q``'s order."""
        t, qs = self.tree, frozenset(q)
        held = t._smallest_holder(q)
        if held is not None:
            j, on_separator, _ = held
            if on_separator:  # the separator of clique j with its parent: summed from clique j once
                vs, table = self.reduce(j, frozenset(t.separators[j]))
                keep = tuple(vs.index(v) for v in q)
                return sum_plan(table.shape, keep)(table) if len(keep) < table.ndim else table.transpose(keep).copy()
            vs, table = self.reduce(j, qs)
            return table.transpose([vs.index(v) for v in q]) if len(q) > 1 else table
        r = self._root(q)
        incoming = self._incoming(r, qs)
        top = self.reduce(r, frozenset(qs & self.cset[r]).union(*(s for _, s, _ in incoming)))
        return self._contract(r, top, incoming, q)


BLAS_CELLS = 1 << 16  # a contraction over more index combinations than this runs through einsum's planned (BLAS) path
LATTICE_CELLS = 4096  # a table this small is summed onto each target directly


def _lattice_sums(variables: tuple, table: np.ndarray, targets: set, out: dict) -> None:
    """``table`` (axes ``variables``) summed onto each set of variables in ``targets``, into ``out``
    (keyed by the set: the variables kept, in ``variables``' order, and the table), sharing the sums:
    the variable in the fewest targets is summed out once, and the targets without it are taken from
    that smaller table (recursively); the rest, which all hold it, continue on this table with it kept.
    A table summed onto many small sets costs a few passes over it, not one per set: a 2.8 million-cell
    clique of fifteen variables onto its 455 triples, fifteen passes and then smaller tables.

    Examples
    --------
    >>> t = np.arange(24.0).reshape(2, 3, 4)
    >>> out = {}
    >>> _lattice_sums(("A", "B", "C"), t, {frozenset("A"), frozenset("BC"), frozenset("AC")}, out)
    >>> bool(np.allclose(out[frozenset("AC")][1], t.sum(axis=1))), out[frozenset("BC")][0]
    (True, ('B', 'C'))
    """
    full = frozenset(variables)
    if full in targets:
        out[full] = (variables, table)
    todo = [t for t in targets if t != full and t not in out]
    kept: set = set()
    while todo:
        if len(todo) == 1 or table.size <= LATTICE_CELLS:
            for t in todo:
                keep = tuple(k for k, v in enumerate(variables) if v in t)
                out[t] = (tuple(variables[k] for k in keep), sum_plan(table.shape, keep)(table))
            return
        free = [k for k, v in enumerate(variables) if v not in kept]
        ax = min(free, key=lambda k: (sum(variables[k] in t for t in todo), -table.shape[k]))
        x = variables[ax]
        without = {t for t in todo if x not in t}
        _lattice_sums(variables[:ax] + variables[ax + 1:], table.sum(axis=ax), without, out)
        todo = [t for t in todo if x in t]
        kept.add(x)
