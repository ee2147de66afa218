"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest


@pytest.fixture
def quality_app(monkeypatch):
    """The real `trilemma` app (which registers `fit` and `optimal`) on a wide terminal."""
    from trilemma import cli

    monkeypatch.setenv("COLUMNS", "250")
    return cli.app
