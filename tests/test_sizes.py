"""Every module of the package stays readable in one sitting: no file over MAX_FILE_LINES lines and
no function over MAX_FUNCTION_LINES lines (a function counts from its ``def`` line to its last).

ALLOWED names the files still over a limit while they are being split, each with its reason. It
must shrink to empty: the command-line and web modules it was written for have moved to the
request layer and left it; a file that no longer needs its entry fails the test until the entry
goes.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "trilemma"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80

#: package-relative path → why it is still over a limit (empty when every split has landed)
ALLOWED: dict[str, str] = {}


def oversized(source: str) -> list[str]:
    """What in one module's ``source`` is over a limit: 'N lines' for the file, 'name: N lines'
    for each function (methods and nested functions included)."""
    out = []
    lines = len(source.splitlines())
    if lines > MAX_FILE_LINES:
        out.append(f"{lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out.append(f"{node.name}: {length} lines")
    return out


def _package_report() -> dict[str, list[str]]:
    """Package-relative path → what in it is over a limit, for every module that has anything."""
    report = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = oversized(path.read_text(encoding="utf-8"))
        if found:
            report[path.relative_to(PACKAGE).as_posix()] = found
    return report


def test_no_file_or_function_is_over_its_limit():
    """Each module ≤ 400 lines, each function ≤ 80, but the files ALLOWED names."""
    over = {p: found for p, found in _package_report().items() if p not in ALLOWED}
    assert not over, "over the size limits (split by concern):\n" + "\n".join(
        f"  {p}: {', '.join(found)}" for p, found in over.items()
    )


def test_the_allow_list_names_only_files_still_over():
    """An entry whose file is now within the limits (or gone) is stale: remove it."""
    report = _package_report()
    stale = sorted(p for p in ALLOWED if p not in report)
    assert not stale, "ALLOWED entries no longer needed: " + ", ".join(stale)


def test_the_size_check_finds_a_long_function_and_a_long_file():
    """The checker reports a function one line over and a file one line over, and nothing at the
    limits themselves."""
    at_limit = "def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1)
    assert oversized(at_limit) == []
    one_over = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    assert oversized(one_over) == [f"f: {MAX_FUNCTION_LINES + 1} lines"]
    long_file = "x = 1\n" * (MAX_FILE_LINES + 1)
    assert oversized(long_file) == [f"{MAX_FILE_LINES + 1} lines"]
    method = "class C:\n    def m(self):\n" + "        x = 1\n" * MAX_FUNCTION_LINES
    assert oversized(method) == [f"m: {MAX_FUNCTION_LINES + 1} lines"]
