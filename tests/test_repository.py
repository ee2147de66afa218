"""The repository explains itself: the README's "Where to change what" table names files that exist,
and nothing cites a document or a tracker a reader of the repository does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the changes the README's table must cover, in its order
CHANGES = (
    "a GPU",
    "a model family",
    "a parallel axis",
    "a verb",
    "an export engine",
    "a request field",
)
#: where prose and code a reader sees live (data files cite upstream trackers such as llama.cpp#2011)
READ = ("src", "tests", "benchmarks", "scripts", "docs", "examples", "README.md", ".ci")
SUFFIXES = {".py", ".md", ".toml", ".sh", ".js", ".html", ".txt", ""}
CACHES = {"__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}


def _section(text: str, heading: str) -> str:
    """The text of the README section ``## heading``, up to the next ``## ``."""
    assert f"\n## {heading}\n" in text, f"the README has no section '## {heading}'"
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _table_rows(section: str) -> list[tuple[str, str]]:
    """(first cell, second cell) of each body row of the section's first table."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [tuple(c.strip() for c in row.strip("|").split("|", 1)) for row in rows[2:]]


def _paths(cell: str) -> list[str]:
    """The repository paths written in backticks in a table cell."""
    return [p for p in re.findall(r"`([^`\s]+)`", cell) if "/" in p or p.endswith(".md")]


def _built(path: Path) -> bool:
    """A file the build or the tools wrote (egg-info, caches), not one a person wrote."""
    return any(part.endswith(".egg-info") or part in CACHES for part in path.parts)


def _files() -> list[Path]:
    out = []
    for top in READ:
        base = ROOT / top
        found = [base] if base.is_file() else sorted(base.rglob("*"))
        out += [p for p in found if p.is_file() and p.suffix in SUFFIXES and not _built(p)]
    return out


def test_the_where_to_change_what_table_names_files_that_exist():
    rows = _table_rows(
        _section((ROOT / "README.md").read_text(encoding="utf-8"), "Where to change what")
    )
    assert len(rows) == len(CHANGES) and all(r[0].startswith(c) for r, c in zip(rows, CHANGES)), (
        f"the table's rows are {[r[0] for r in rows]}; expected {CHANGES}"
    )
    missing = [(r[0], p) for r in rows for p in _paths(r[1]) if not (ROOT / p).exists()]
    assert all(_paths(r[1]) for r in rows), "each row names at least one file"
    assert not missing, f"files the README's table names that do not exist: {missing}"


def test_no_tracker_numbers_in_what_a_reader_sees():
    """'issue 12', 'Issue 16 (part 6)': the tracker is not in the repository; say what the thing is."""
    pattern = re.compile(r"\b[Ii]ssues? ?#?\d+")
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()[:80]}"
        for p in _files()
        for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if pattern.search(line) and p.name != "test_repository.py"
    ]
    assert not found, "tracker numbers:\n" + "\n".join(found)


def test_no_citation_of_notes_outside_the_repository():
    """DESIGN.md and STYLE.md were notes users did not have; their content is in docs/."""
    found = [
        str(p.relative_to(ROOT))
        for p in _files()
        if re.search(r"\b(DESIGN|STYLE)\.md\b", p.read_text(encoding="utf-8", errors="replace"))
        and p.name != "test_repository.py"
    ]
    assert not found, f"files citing DESIGN.md or STYLE.md: {found}"
