"""The explanation pages (docs/explain/) stay what they promise: short, about what is rather than how it
got there, and quoting benchmark figures that benchmarks/RESULTS.md still holds, each table or quote
followed by the command that regenerates it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPLAIN = ROOT / "docs" / "explain"
PAGES = sorted(p for p in EXPLAIN.glob("*.md") if p.name != "index.md")
RESULTS = (ROOT / "benchmarks" / "RESULTS.md").read_text()
MAX_LINES = 300
# a numbered round of work or an issue number: history belongs in the commit log
CHRONOLOGY = re.compile(r"\bsessions? \d|\bissues? #?\d|(?<![\w&])#\d+\b", re.I)
COMMAND = re.compile(r"`(python benchmarks/\S+\.py[^`]*|pytest [^`]*)`")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_separator(line: str) -> bool:
    return set(line.replace("|", "").replace(" ", "")) <= set("-:")


RESULT_ROWS = [_cells(line) for line in RESULTS.splitlines() if line.startswith("|") and not _is_separator(line)]
RESULT_LINES = set(RESULTS.splitlines())


def _subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(c == b for b in it) for c in small)


def _blocks(text: str) -> list[tuple[str, list[str], int]]:
    """Quoted material of a page: ("table", rows, last line) and ("quote", lines, last line)."""
    out, kind, cur = [], None, []
    lines = text.splitlines()
    for i, line in enumerate(lines + [""]):
        now = "table" if line.startswith("|") else "quote" if line.startswith("> ") else None
        if now != kind and cur:
            out.append((kind, cur, i - 1))
            cur = []
        kind = now
        if now:
            cur.append(line)
    return out


def _source(lines: list[str], last: int) -> str | None:
    """The command named after a quoted block: in the first paragraph that is neither a table nor a quote."""
    for i in range(last + 1, min(last + 12, len(lines))):
        if lines[i].startswith(("|", ">")) or not lines[i].strip():
            continue
        found = COMMAND.search(" ".join(lines[i:i + 3]))
        return found.group(1) if found else None
    return None


def test_there_are_explanation_pages_and_an_index_that_lists_them():
    assert len(PAGES) >= 4
    index = (EXPLAIN / "index.md").read_text()
    for page in PAGES:
        assert f"\n{page.stem}\n" in index, f"{page.name} is not in docs/explain/index.md's toctree"
    assert "explain/index" in (ROOT / "docs" / "index.md").read_text()


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_is_short_and_says_what_is_not_how_it_got_there(page):
    text = page.read_text()
    assert len(text.splitlines()) <= MAX_LINES, f"{page.name}: {len(text.splitlines())} lines (at most {MAX_LINES})"
    hits = [m.group(0) for m in CHRONOLOGY.finditer(text)]
    assert not hits, f"{page.name}: history in the page: {hits}"
    assert "## Tried and not kept" in text


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_quoted_tables_name_their_command_and_match_results(page):
    lines = page.read_text().splitlines()
    for kind, block, last in _blocks(page.read_text()):
        command = _source(lines, last)
        assert command, f"{page.name}: the {kind} ending at line {last + 1} names no command that regenerates it"
        if not command.startswith("python benchmarks/"):
            continue  # figures asserted by tests: the tests are their source
        if kind == "quote":
            for line in block:
                assert line[2:] in RESULT_LINES, f"{page.name}, line {lines.index(line) + 1}: not a line of RESULTS.md: {line[:80]}"
            continue
        for row in (r for r in block if not _is_separator(r)):
            assert any(_subsequence(_cells(row), r) for r in RESULT_ROWS), (
                f"{page.name}, line {lines.index(row) + 1}: not a row (or a selection of the columns of a row) of "
                f"RESULTS.md: {row[:100]}")
