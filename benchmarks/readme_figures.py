"""Copy the benchmark figures the README quotes from ``benchmarks/RESULTS.md``, so that the README
never states a number by hand.

The README marks each quote as

    <!-- figures: SECTION | PREFIX -->
    > (the line of RESULTS.md's SECTION that starts with PREFIX)
    <!-- /figures -->

and this script replaces every quote with the current line (a table row keeps its cells). A single
figure inside a sentence or a table of the README is marked

    <!-- cell: SECTION | PREFIX | K -->(cell K, from 0, of the row of SECTION starting with PREFIX)<!-- /cell -->

The same marks work in the documentation's pages (``docs/**/*.md``). Run it after a benchmark rewrites
its section:

    python benchmarks/readme_figures.py          # rewrites README.md in place

``tests/test_readme.py`` checks that the README is in sync.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- figures: (?P<section>[\w-]+) \| (?P<prefix>.+?) -->\n(?P<body>.*?)<!-- /figures -->", re.S)
CELL = re.compile(r"<!-- cell: (?P<section>[\w-]+) \| (?P<prefix>.+?) \| (?P<k>\d+) -->(?P<body>.*?)<!-- /cell -->")


def section(results: str, name: str) -> str:
    """The text of RESULTS.md's section ``name`` (between its begin and end markers)."""
    m = re.search(rf"<!-- begin {re.escape(name)} -->\n(.*?)<!-- end {re.escape(name)} -->", results, re.S)
    if m is None:
        raise KeyError(f"RESULTS.md has no section {name!r}")
    return m.group(1)


def quote(results: str, name: str, prefix: str) -> str:
    """The first line of section ``name`` that starts with ``prefix``, as a Markdown quote."""
    for line in section(results, name).splitlines():
        if line.startswith(prefix):
            return f"> {line}\n"
    raise KeyError(f"RESULTS.md section {name!r} has no line starting with {prefix!r}")


def cell(results: str, name: str, prefix: str, k: int) -> str:
    """Cell ``k`` (from 0) of the table row of section ``name`` that starts with ``| prefix``."""
    line = quote(results, name, prefix)[2:].strip()
    cells = [c.strip() for c in line.strip("|").split("|")]
    if k >= len(cells):
        raise KeyError(f"RESULTS.md section {name!r}: the row starting with {prefix!r} has no cell {k}")
    return cells[k]


def synced(readme: str, results: str) -> str:
    """``readme`` with every marked quote and cell replaced by the current text of RESULTS.md."""
    text = MARK.sub(lambda m: f"<!-- figures: {m['section']} | {m['prefix']} -->\n{quote(results, m['section'], m['prefix'])}"
                              "<!-- /figures -->", readme)
    return CELL.sub(lambda m: f"<!-- cell: {m['section']} | {m['prefix']} | {m['k']} -->"
                              f"{cell(results, m['section'], m['prefix'], int(m['k']))}<!-- /cell -->", text)


def documents() -> list:
    """The files whose quotes are kept in sync: README.md and the documentation's pages."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main() -> int:
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    for path in documents():
        text = path.read_text()
        new = synced(text, results)
        if new != text:
            path.write_text(new)
            print(f"{path.relative_to(ROOT)}: figures updated from benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
