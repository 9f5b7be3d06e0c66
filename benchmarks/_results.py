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


def machine() -> str:
    import os

    return f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}"


def write_section(name: str, markdown: str) -> None:
    """Replace (or append) the section delimited by ``<!-- begin NAME -->`` / ``<!-- end NAME -->``."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\nEach section is written by the script it names; rerun the script to refresh it.\n"
    block = f"<!-- begin {name} -->\n{markdown.strip()}\n<!-- end {name} -->"
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)
