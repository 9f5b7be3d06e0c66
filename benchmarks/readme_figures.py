"""Copy the benchmark figures the README quotes from ``benchmarks/RESULTS.md``, so that the README
never states a number by hand.

The README marks each quote as

    <!-- figures: SECTION | PREFIX -->
    > (the line of RESULTS.md's SECTION that starts with PREFIX)
    <!-- /figures -->

and this script replaces every quote with the current line (a table row keeps its cells). Run it
after a benchmark rewrites its section:

    python benchmarks/readme_figures.py          # rewrites README.md in place

``tests/test_readme.py`` checks that the README is in sync.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- figures: (?P<section>[\w-]+) \| (?P<prefix>.+?) -->\n(?P<body>.*?)<!-- /figures -->", re.S)


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


def synced(readme: str, results: str) -> str:
    """``readme`` with every marked quote replaced by the current line of RESULTS.md."""
    return MARK.sub(lambda m: f"<!-- figures: {m['section']} | {m['prefix']} -->\n{quote(results, m['section'], m['prefix'])}"
                              "<!-- /figures -->", readme)


def main() -> int:
    readme = ROOT / "README.md"
    text = readme.read_text()
    new = synced(text, (ROOT / "benchmarks" / "RESULTS.md").read_text())
    if new != text:
        readme.write_text(new)
        print("README.md: figures updated from benchmarks/RESULTS.md")
    else:
        print("README.md: figures already in sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
