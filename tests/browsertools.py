"""What the browser tests share (``tests/`` is on sys.path when pytest runs them): their skips — the web
extra, playwright, Debian's Chromium — and one served app with one launched browser per module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def browser_api() -> Any:
    """``playwright.sync_api``, the calling module skipped where the web extra or playwright is missing."""
    pytest.importorskip(
        "fastapi", reason="the web extra is not installed (pip install 'trilemma[web]')"
    )
    return pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (the dev extra has it)"
    )


def browser_marks() -> list[Any]:
    """A browser module's marks: slow, and skipped without Debian's Chromium."""
    from trilemma.web.testing import CHROMIUM

    return [
        pytest.mark.slow,
        pytest.mark.skipif(
            not Path(CHROMIUM).exists(),
            reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
        ),
    ]


@contextlib.contextmanager
def browser_site() -> Iterator[tuple[object, str]]:
    """(browser, base URL): the app served on a free port and Chromium launched, both closed after."""
    from trilemma.web.testing import CHROMIUM, CHROMIUM_ARGS, running_server

    with running_server() as base, browser_api().sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser, base
        finally:
            browser.close()
