"""Shared by the benchmark scripts: timing with medians, and writing one section of RESULTS.md."""

from __future__ import annotations

import platform
import re
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def median_time(fn, repeats: int = 5, warmup: int = 1) -> tuple[float, object]:
    """Median wall time of ``fn()`` over ``repeats`` runs (after ``warmup`` runs), and its last result."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


HASH_SEED = "2"


def fix_hash_seed() -> None:
    """Re-run this script with a fixed PYTHONHASHSEED. pgmpy 1.1.2 orders variables through sets, so its
    triangulation of ALARM changes with the hash seed: we saw its largest clique go from 21M to over
    100M cells and one calibration from 10 s to over 100 s (and 10+ GB) across seeds 0-3. Seed 2 is
    the fastest of those for pgmpy, so speed-ups measured under it are conservative."""
    import os
    import sys

    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "PYTHONHASHSEED": HASH_SEED})


def machine() -> str:
    import os

    return f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}"


def read_section(name: str) -> str:
    """The text of the section delimited by ``<!-- begin NAME -->`` / ``<!-- end NAME -->`` (empty when absent)."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    found = re.search(rf"<!-- begin {re.escape(name)} -->(.*?)<!-- end {re.escape(name)} -->", text, re.S)
    return found.group(1).strip() if found else ""


def write_section(name: str, markdown: str) -> None:
    """Replace (or append) the section delimited by ``<!-- begin NAME -->`` / ``<!-- end NAME -->``."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\nEach section is written by the script it names; rerun the script to refresh it.\n"
    block = f"<!-- begin {name} -->\n{markdown.strip()}\n<!-- end {name} -->"
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)
