"""Reading the ``.npz`` files that releases and aggregates are shared as, safely.

A release file is something users download from others. ``numpy.load`` unpacks a member as large
as its header claims, so a file of a few hundred kilobytes of compressed zeros can claim gigabytes.
:func:`read_npz` reads every member's header first (the zip directory's uncompressed size and the
``.npy`` header's dtype and shape), refuses object arrays, members whose header and size disagree
and archives larger than ``max_bytes`` in all, and only then unpacks.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

MAX_BYTES = 1 << 30  # 1 GiB of arrays by default
MAX_RATIO = 100  # a release's arrays are noisy numbers: they do not compress more than this (beyond SMALL)
SMALL = 1 << 20  # archives unpacking to less than this are never refused for their ratio


def save_path(path) -> Path:
    """The file an archive is written to, checked before writing: a path (str or os.PathLike) to a
    file in an existing directory, ending in ``.npz`` (numpy would otherwise append it, and the file
    written would not be the one named).

    Examples
    --------
    >>> import tempfile
    >>> save_path(os.path.join(tempfile.mkdtemp(), "release.npz")).suffix
    '.npz'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path ending in .npz, got {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"path: {str(p)!r} is a directory; expected a file path ending in .npz")
    if p.suffix != ".npz":
        raise ValueError(f"path: {str(p)!r} does not end in .npz (numpy would write {str(p)!r} + '.npz'); name the file .npz")
    if not p.parent.is_dir():
        raise ValueError(f"path: the directory {str(p.parent)!r} does not exist")
    return p


def read_npz(path, what: str, required: tuple = (), max_bytes: int = MAX_BYTES) -> dict:
    """The arrays of the ``.npz`` file ``path``, checked before unpacking.

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        What the file should hold (for messages), e.g. ``"a ppgm release (NoisyTables.save)"``.
    required : tuple of str
        Member names the file must have.
    max_bytes : int
        Largest total size of the unpacked arrays.

    Returns
    -------
    dict of numpy.ndarray

    Raises
    ------
    TypeError
        ``path`` is not a path.
    FileNotFoundError
        No file at ``path``.
    ValueError
        Not an ``.npz`` archive, a member that is not a plain array, missing members, or more than
        ``max_bytes`` to unpack.

    Examples
    --------
    >>> import tempfile
    >>> f = os.path.join(tempfile.mkdtemp(), "x.npz"); np.savez(f, a=np.arange(3))
    >>> read_npz(f, "a test file", required=("a",))["a"].tolist()
    [0, 1, 2]
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)) or max_bytes < 1:
        raise TypeError(f"max_bytes: expected a positive whole number of bytes, got {max_bytes!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no file at {str(path)!r}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"path: {str(path)!r} is not an .npz archive; expected {what}")
    total = 0
    with zipfile.ZipFile(path) as z:
        members = {}
        for info in z.infolist():
            if not info.filename.endswith(".npy"):
                raise ValueError(f"path: {str(path)!r} holds {info.filename!r}, not an array; expected {what}")
            with z.open(info) as f:
                try:
                    version = np.lib.format.read_magic(f)
                    reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                    if reader is None:
                        raise ValueError(f"format version {version}")
                    shape, _, dtype = reader(f, max_header_size=100_000)
                except ValueError as err:
                    raise ValueError(f"path: {info.filename!r} in {str(path)!r} is not a valid array ({err})") from None
                header = f.tell()
            if dtype.hasobject:
                raise ValueError(f"path: {info.filename!r} in {str(path)!r} holds Python objects; expected {what}")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if nbytes != info.file_size - header:
                raise ValueError(f"path: {info.filename!r} in {str(path)!r} claims {nbytes:,} bytes but holds "
                                 f"{info.file_size - header:,}; the file is damaged or forged")
            total += nbytes
            if total > max_bytes:
                raise ValueError(f"path: {str(path)!r} would unpack to more than {max_bytes:,} bytes; refused "
                                 f"(pass a larger max_bytes if you trust the file)")
            if total > SMALL and total > MAX_RATIO * path.stat().st_size:
                raise ValueError(f"path: {str(path)!r} declares {total:,} bytes of arrays in a {path.stat().st_size:,}-byte "
                                 f"file, more than {MAX_RATIO}:1; noisy tables do not compress like that, so the file is "
                                 "forged or damaged; refused")
            members[info.filename[:-4]] = info
        missing = [m for m in required if m not in members]
        if missing:
            raise ValueError(f"path: {str(path)!r} has no {missing}; expected {what}")
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
