"""The junction tree's memory budget, shared by its construction and its queries."""

DEFAULT_MAX_CELLS = 50_000_000  # 400 MB of float64 per copy of the clique tables


class JunctionTreeTooLarge(MemoryError):
    """Raised when the junction tree's clique tables would exceed the memory budget.

    Examples
    --------
    >>> from ppgm import JunctionTree
    >>> from ppgm.models.random_models import grid
    >>> g = grid(10, 10, seed=0)
    >>> try:
    ...     JunctionTree.build(g.domain, g.scopes, max_cells=100)
    ... except JunctionTreeTooLarge as err:
    ...     print("too large")
    too large
    """
