"""Progress bars and messages that read well in a terminal, a notebook and a log file alike.

Every long loop in ppgm (EM, PCD, loopy BP, the robust filter, the demo) draws its bar through
:func:`progress_bar`. A bar is shown only where someone watches it: an interactive terminal, or a
Jupyter kernel that can draw widgets. Written to a file, a CI log or a pipe, a carriage-return bar
would leave one line per update, so there it stays off; a warning-free text bar is used in a kernel
without ``ipywidgets``. Messages go through the standard :mod:`logging` module under the ``"ppgm"``
logger (silent unless the application configures logging).

One switch turns every bar off (or forces them on): :func:`set_progress`, or the environment
variable ``PPGM_PROGRESS`` (``0`` / ``1``) read at import.

Examples
--------
>>> set_progress(False)
>>> bar = progress_bar(total=3, desc="work")
>>> bar.disable
True
>>> bar.close()
>>> set_progress(None)   # back to the automatic rule
"""

from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger("ppgm")
logger.addHandler(logging.NullHandler())


class ConvergenceWarning(UserWarning):
    """An iterative method stopped at its iteration limit before its convergence test passed; the
    result says so too (``converged`` / the history).

    Examples
    --------
    >>> issubclass(ConvergenceWarning, UserWarning)
    True
    """

_FORCED: bool | None = {"0": False, "1": True}.get(os.environ.get("PPGM_PROGRESS", "").strip())


def set_progress(enabled: bool | None) -> None:
    """Turn every ppgm progress bar off (``False``), on wherever a ``progress=`` argument allows it
    (``True``, even in a non-terminal log), or back to the automatic rule (``None``: on in a terminal
    or a notebook, off otherwise).

    Parameters
    ----------
    enabled : bool or None

    Returns
    -------
    None

    Examples
    --------
    >>> set_progress(False); progress_bar(total=1).disable
    True
    >>> set_progress(None)
    """
    global _FORCED
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"enabled: expected True, False or None, got {enabled!r}")
    _FORCED = enabled


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except Exception:  # pragma: no cover - unusual IPython builds
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _widgets() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def bars_visible() -> bool:
    """Whether a bar asked for would be drawn: the switch, else a terminal or a notebook kernel.

    Examples
    --------
    >>> set_progress(True); bars_visible()
    True
    >>> set_progress(None)
    """
    if _FORCED is not None:
        return _FORCED
    if _in_notebook():
        return True
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def progress_bar(iterable=None, *, total: int | None = None, desc: str = "", enabled: bool = True, **kwargs):
    """A tqdm bar over ``iterable`` (or for ``total`` manual updates) that is drawn only when
    ``enabled`` and :func:`bars_visible`; otherwise a disabled bar with the same interface.

    Parameters
    ----------
    iterable : iterable, optional
    total : int, optional
    desc : str
    enabled : bool
        The caller's ``progress=`` argument.
    **kwargs
        Passed to tqdm.

    Returns
    -------
    tqdm.tqdm

    Examples
    --------
    >>> sum(progress_bar(range(4), desc="sum", enabled=False))
    6
    """
    show = bool(enabled) and bars_visible()
    kwargs.setdefault("leave", False)
    if show and _in_notebook() and _widgets():
        from tqdm.notebook import tqdm as bar
    else:
        from tqdm.std import tqdm as bar
        if show and _in_notebook():
            kwargs.setdefault("mininterval", 1.0)  # a text bar in a kernel without widgets: few redraws
    return bar(iterable, total=total, desc=desc, disable=not show, **kwargs)
