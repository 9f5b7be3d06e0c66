"""No file of the repository reads like a diary: no numbered round of work ("session" and a number) and no
issue number ("issue" and a number, or a number in brackets after "#"). Files say what is and why for the
person reading them now; history goes to the commit log and CHANGELOG.md. References to another
project's tracker stay allowed when they say which project: a URL, or ``owner/repo#N``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a numbered round of work, an issue number, a pull-request-style "(#N)"
DIARY = re.compile(r"\bsessions? [0-9]+|\bissues? #?[0-9]+|\(#[0-9]+\)", re.I)
# allowed: another project's tracker named by URL or by owner/repo#N (removed before the search)
ALLOWED = re.compile(r"\b[a-z]+://\S+|\b[\w.-]+/[\w.-]+#[0-9]+\b", re.I)


def diary_hits(text: str) -> list[tuple[int, str]]:
    """``(line number, match)`` of every diary reference in ``text``, the allowed references left out."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        out.extend((number, m.group(0)) for m in DIARY.finditer(ALLOWED.sub(" ", line)))
    return out


def _tracked_text_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in names.decode().split("\0"):
        path = ROOT / name
        if name and path.is_file() and b"\0" not in path.read_bytes()[:8192]:
            files.append(path)
    return files


def test_the_search_finds_each_form_and_allows_other_projects_trackers():
    s, i = "sess" + "ion", "iss" + "ue"  # spelled apart so that this file does not match itself
    bad = [f"fixed in {s} 12", f"{s.capitalize()}s 3 and 4", f"see {i} #31", f"{i}s 7", f"{i.upper()} 5",
           "the rule (" + "#42) chose it"]
    for text in bad:
        assert diary_hits(text), text
    good = ["OpenDP's MST fails (opendp/opendp#2789)", f"https://github.com/pgmpy/pgmpy/{i}s/1234",
            f"see https://example.org/{i} 5 there", f"{s}s of work", f"an {i} with the budget", "cell #3 of 4",
            "colour #1f77b4"]
    for text in good:
        assert not diary_hits(text), text
    assert diary_hits(f"line one\nopendp/opendp#2789 and {i} #9\n") == [(2, f"{i} #9")]


def test_no_tracked_file_reads_like_a_diary():
    files = _tracked_text_files()
    assert len(files) > 50 and ROOT / "README.md" in files
    hits = [f"{path.relative_to(ROOT)}:{number}: {match}"
            for path in files for number, match in diary_hits(path.read_bytes().decode("utf-8", "replace"))]
    assert not hits, "history in the repository's files (say what is; history goes to the commit log):\n" + "\n".join(hits)
