"""The authors' binary encoding of a categorical Bayesian network (Cheng et al. 2018, Sec. 4.2).

A k-ary variable becomes ceil(log2 k) bits, most significant first. States are padded to 2^B: the
last real state and the phantom states above it share that state's probability equally (a ternary
variable gets a phantom fourth state with half of its third state's probability), and as a parent
a phantom state behaves exactly like the last real state. Bit j of a variable has as parents all
bits of the variable's original parents, then the variable's own higher bits. ALARM (37 nodes, 509
parameters) becomes 61 binary nodes with 820 parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..core.rng import as_generator
from ..factors.domain import Domain
from ..factors.records import check_records
from ..models.bayes import BayesianNetwork


def _n_bits(k: int) -> int:
    return max(1, int(np.ceil(np.log2(k)))) if k > 1 else 1


@dataclass(frozen=True)
class BinaryEncoding:
    """Map from a categorical DAG to its binary encoding.

    Attributes
    ----------
    source : Domain
        The categorical variables.
    bits : dict
        ``{variable: tuple of bit names}``, most significant first (a binary variable keeps its name).
    domain : Domain
        The binary variables, in source order.
    parents : dict
        Parents of every bit.

    Parameters
    ----------
    source : Domain
    source_parents : mapping
    bits : mapping
    domain : Domain
    parents : mapping
        See Attributes; built by :func:`binary_encoding`.

    Examples
    --------
    >>> enc = binary_encoding(Domain(("A", "B"), (3, 2)), {"B": ("A",)})
    >>> enc.bits["A"], enc.parents["B"], enc.n_parameters
    (('A#0', 'A#1'), ('A#0', 'A#1'), 7)
    """

    source: Domain
    source_parents: Mapping
    bits: Mapping
    domain: Domain
    parents: Mapping

    @property
    def n_parameters(self) -> int:
        """Number of free parameters of the binary network (one per CPT row)."""
        return sum(2 ** len(self.parents[b]) for b in self.domain.variables)

    def encode_records(self, records, seed=None) -> np.ndarray:
        """Categorical records as bits, most significant first. The last real state of a variable whose
        cardinality is not a power of two is written as itself or one of the phantom codes above it,
        uniformly at random (the encoded network shares its probability the same way).

        Parameters
        ----------
        records : array of int, shape (N, len(source))
        seed : int or numpy.random.Generator, optional
            Kept for reproducibility of randomised encodings.

        Returns
        -------
        numpy.ndarray of int, shape (N, len(domain))

        Examples
        --------
        >>> from ppgm import Domain
        >>> enc = binary_encoding(Domain(("A",), (3,)), {})
        >>> enc.encode_records(np.array([[0], [1]])).tolist()
        [[0, 0], [0, 1]]
        """
        rec = check_records(records, self.source)
        rng = as_generator(seed)
        cols = []
        for j, (v, k) in enumerate(zip(self.source.variables, self.source.cards)):
            B = len(self.bits[v])
            s = rec[:, j]
            extra = 2**B - k
            if extra > 0:
                last = s == k - 1
                s = s + np.where(last, rng.integers(0, extra + 1, size=s.size), 0)
            for b in range(B):
                cols.append((s >> (B - 1 - b)) & 1)
        return np.stack(cols, axis=1) if cols else np.zeros((rec.shape[0], 0), dtype=np.int64)

    def encode_network(self, bn: BayesianNetwork) -> BayesianNetwork:
        """The binary network whose distribution over the bits equals the categorical one's (phantom codes
        get probability zero).

        Parameters
        ----------
        bn : BayesianNetwork
            Over ``source`` with ``source_parents``.

        Returns
        -------
        BayesianNetwork

        Examples
        --------
        >>> from ppgm.models.random_models import random_bayesian_network
        >>> bn = random_bayesian_network(2, 3, seed=0)
        >>> len(binary_encoding(bn.domain, bn.parents).encode_network(bn).domain)
        4
        """
        if bn.domain != self.source:
            raise ValueError("bn: its domain differs from the encoding's source domain")
        cpts = {}
        for v, k in zip(self.source.variables, self.source.cards):
            ps = self.source_parents[v]
            B = len(self.bits[v])
            K = 2**B
            # p over padded states given padded parent states
            table = bn.cpts[v]
            for a, p in enumerate(ps):  # phantom parent states copy the last real state
                kp = self.source.card(p)
                Kp = 2 ** len(self.bits[p])
                table = np.take(table, np.minimum(np.arange(Kp), kp - 1), axis=a)
            ext = np.concatenate(
                [table[..., : k - 1], np.repeat(table[..., k - 1 :] / (K - k + 1), K - k + 1, axis=-1)], axis=-1
            ) if K > k else table
            # split every padded axis into its bits (most significant first)
            shape = []
            for p in ps:
                shape += [2] * len(self.bits[p])
            lead = len(shape)
            ext = ext.reshape(shape + [2] * B)
            for b, name in enumerate(self.bits[v]):
                marg = ext.sum(axis=tuple(range(lead + b + 1, lead + B))) if b + 1 < B else ext
                tot = marg.sum(axis=-1, keepdims=True)
                cpts[name] = np.where(tot > 0, marg / np.where(tot > 0, tot, 1), 0.5)
        return BayesianNetwork(self.domain, self.parents, cpts)


def binary_encoding(domain: Domain, parents: Mapping) -> BinaryEncoding:
    """Build the binary encoding of the DAG ``parents`` over ``domain``: each variable of k states becomes
    ceil(log2 k) binary variables, each with the original parents' bits and its own earlier bits as parents.

    Parameters
    ----------
    domain : Domain
        The categorical variables.
    parents : mapping
        ``{variable: parents}``; variables not listed have none.

    Returns
    -------
    BinaryEncoding

    Examples
    --------
    >>> enc = binary_encoding(Domain(("A",), (4,)), {})
    >>> enc.bits["A"], enc.parents["A#1"]
    (('A#0', 'A#1'), ('A#0',))
    """
    parents = {v: domain.check(parents.get(v, ()), f"parents[{v!r}]") for v in domain.variables}
    bits = {}
    for v, k in zip(domain.variables, domain.cards):
        B = _n_bits(k)
        bits[v] = (v,) if B == 1 else tuple(f"{v}#{b}" for b in range(B))
    names = [b for v in domain.variables for b in bits[v]]
    bin_domain = Domain(tuple(names), (2,) * len(names))
    bin_parents = {}
    for v in domain.variables:
        up = tuple(b for p in parents[v] for b in bits[p])
        for j, name in enumerate(bits[v]):
            bin_parents[name] = up + bits[v][:j]
    return BinaryEncoding(domain, parents, bits, bin_domain, bin_parents)
