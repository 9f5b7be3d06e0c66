"""pgmpy's bundled example networks, read offline with ``BIFReader`` (not the deprecated
``get_example_model``)."""

from __future__ import annotations

import gzip
from importlib.resources import files

import numpy as np
import pandas as pd
from pgmpy.factors.discrete import DiscreteFactor
from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork
from pgmpy.readwrite import BIFReader

from ppgm.core import checks
from ppgm.factors.domain import Domain
from ppgm.models.markov import MarkovNetwork
from ppgm.models.random_models import mobility_chain, third_order_chain
from ppgm.core.rng import as_generator
from ppgm.inference.sampling import sample_markov


def load_bif_example(name: str) -> DiscreteBayesianNetwork:
    """A ``DiscreteBayesianNetwork`` from pgmpy's bundled ``<name>.bif.gz`` (e.g. ``"alarm"``).

    Parameters
    ----------
    name : str
        A network pgmpy ships (asia, alarm, child, insurance, ...).

    Returns
    -------
    DiscreteBayesianNetwork

    Examples
    --------
    >>> len(load_bif_example("asia").nodes())
    8
    """
    ref = files("pgmpy") / "utils" / "example_models" / f"{name}.bif.gz"
    if not ref.is_file():
        folder = files("pgmpy") / "utils" / "example_models"
        known = sorted(p.name[: -len(".bif.gz")] for p in folder.iterdir() if p.name.endswith(".bif.gz"))
        raise ValueError(f"name: no bundled network {name!r}; pgmpy ships {known}")
    with gzip.open(ref) as fh:
        return BIFReader(string=fh.read().decode("utf-8")).get_model()


def dirichlet_chain_network(n_vars: int = 10, k: int = 10, alpha: float = 1.0, seed=None) -> DiscreteMarkovNetwork:
    """The CGM paper's third-order chain as a pgmpy ``DiscreteMarkovNetwork``, with the raw
    Dirichlet(alpha) edge tables as factor values (entries near 1/k^2, the regime in which pgmpy's
    own ``BeliefPropagation`` stops early).

    Parameters
    ----------
    n_vars : int
        Variables (at least 2).
    k : int
        States per variable.
    alpha : float
        Dirichlet concentration of the edge tables.
    seed : int or numpy.random.Generator, optional

    Returns
    -------
    DiscreteMarkovNetwork

    Examples
    --------
    >>> sorted(dirichlet_chain_network(5, 3, seed=0).nodes())
    ['X0', 'X1', 'X2', 'X3', 'X4']
    """
    m = third_order_chain(n_vars, k, alpha, seed)
    mn = DiscreteMarkovNetwork()
    mn.add_nodes_from(m.domain.variables)
    mn.add_edges_from(f.variables for f in m.factors)
    mn.add_factors(*[DiscreteFactor(list(f.variables), list(f.shape), np.exp(f.values)) for f in m.factors])
    return mn


MAX_HOURS, MAX_LOCATIONS = 1_000, 100  # the simulated study's bounds (its chain has one variable per hour)
MAX_STUDY_CELLS = 10**8  # person-days x (hours + 1) cells of the returned DataFrame


def mobility_study(n_people: int = 1000, max_days: int = 7, locations: int = 5, hours: int = 24, seed=None) -> tuple:
    """Synthetic Wi-Fi mobility traces in the shape of the CGM paper's study (Sec. 4.2), whose data
    are not public: people who each contribute 1 to ``max_days`` days, every day a trajectory over
    ``hours`` hourly steps among ``locations`` places and an offline state, drawn exactly from one
    time-homogeneous chain (:func:`ppgm.models.random_models.mobility_chain`).

    Parameters
    ----------
    n_people : int
    max_days : int
        Each person's number of days is uniform on 1 .. max_days (people, not rows, are the unit of
        privacy: release with ``individuals="person", reweight=True``).
    locations, hours : int
        At most ``MAX_LOCATIONS`` (100) and ``MAX_HOURS`` (1,000); the study at most
        ``MAX_STUDY_CELLS`` (1e8) cells, n_people x max_days x (hours + 1).
    seed : int or numpy.random.Generator, optional
        Draws the chain and the traces.

    Returns
    -------
    (pandas.DataFrame, DiscreteMarkovNetwork, list)
        One row per person-day (``person`` and the hour columns ``h00`` ... with states ``"off"``,
        ``"loc1"`` ...), the true chain as a pgmpy network (states named), and the tied group of its
        pairwise cliques for the estimators' ``tied=``.

    Examples
    --------
    >>> df, truth, tied = mobility_study(50, max_days=3, locations=3, hours=6, seed=0)
    >>> list(df.columns)[:3], len(tied[0]), sorted(truth.nodes())[:2]
    (['person', 'h00', 'h01'], 5, ['h00', 'h01'])
    """
    from .models import markov_to_pgmpy

    n_people, max_days = checks.count(n_people, "n_people"), checks.count(max_days, "max_days")
    hours, locations = checks.count(hours, "hours", 2), checks.count(locations, "locations")
    if hours > MAX_HOURS or locations > MAX_LOCATIONS:
        raise ValueError(f"hours, locations: expected at most {MAX_HOURS:,} hours and {MAX_LOCATIONS:,} locations, "
                         f"got {hours:,} and {locations:,}")
    if n_people * max_days * (hours + 1) > MAX_STUDY_CELLS:
        raise ValueError(f"n_people, max_days, hours: up to {n_people * max_days:,} person-days of {hours} hours is more than "
                         f"{MAX_STUDY_CELLS:,} cells; a smaller study, please")
    rng = as_generator(seed)
    chain = mobility_chain(locations, hours, seed=rng)
    days = rng.integers(1, int(max_days) + 1, size=int(n_people))
    codes = sample_markov(chain, int(days.sum()), seed=rng)
    states = ["off"] + [f"loc{i}" for i in range(1, locations + 1)]
    names = list(chain.domain.variables)
    df = pd.DataFrame(np.asarray(states, dtype=object)[codes], columns=names)
    df.insert(0, "person", np.repeat(np.arange(int(n_people)), days))
    named = Domain(chain.domain.variables, chain.domain.cards, {v: states for v in names})
    truth = markov_to_pgmpy(MarkovNetwork(named, chain.factors))
    tied = [[(names[t], names[t + 1]) for t in range(hours - 1)]]
    return df, truth, tied


def load_adult() -> tuple:
    """The UCI Adult census-income data, official split, as ``(train, test)`` DataFrames.

    Bundled with ppgm (see ``ppgm/adapters/datasets/adult/README.md`` for its provenance), so it
    loads offline: 32,561 and 16,281 rows, 14 features and the label ``income`` (``<=50K`` /
    ``>50K``); missing values are the category ``?``.

    Returns
    -------
    tuple of pandas.DataFrame
        ``(train, test)``.

    Examples
    --------
    >>> train, test = load_adult()
    >>> train.shape, test.shape, sorted(train["income"].unique())
    ((32561, 15), (16281, 15), ['<=50K', '>50K'])
    """
    import pandas as pd

    folder = files("ppgm.adapters") / "datasets" / "adult"
    with (folder / "adult_train.csv.gz").open("rb") as fh:
        train = pd.read_csv(fh, compression="gzip")
    with (folder / "adult_test.csv.gz").open("rb") as fh:
        test = pd.read_csv(fh, compression="gzip")
    return train, test


def adult_schema() -> dict:
    """The public encoding of the Adult columns, as keyword arguments of
    :func:`ppgm.adapters.aggregate` (``categories``, ``bounds``, ``positive``) for a private release.

    Category lists are those documented with the data set (UCI's ``adult.names``; ``?`` marks an
    unknown value), education codes are 1-16, and numeric columns get round public bounds (see
    ``datasets/adult/schema.json``). Nothing in it is read from the records.

    Returns
    -------
    dict
        ``{"categories": ..., "bounds": ..., "positive": ...}``.

    Examples
    --------
    >>> s = adult_schema()
    >>> sorted(s), s["bounds"]["age"], len(s["categories"]["native-country"])
    (['bounds', 'categories', 'positive'], (17.0, 90.0), 42)
    """
    import json

    with (files("ppgm.adapters") / "datasets" / "adult" / "schema.json").open("r") as fh:
        raw = json.load(fh)
    return {
        "categories": {c: list(v) for c, v in raw["categories"].items()},
        "bounds": {c: (float(lo), float(hi)) for c, (lo, hi) in raw["bounds"].items()},
        "positive": raw["positive"],
    }
