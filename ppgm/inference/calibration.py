"""The result of calibrating a model on a junction tree: clique beliefs, log Z, and the queries
answered from them (a clique's or separator's table summed onto the scope, or the smallest subtree
that connects variables no clique holds together)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Protocol, Sequence

import numpy as np

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
