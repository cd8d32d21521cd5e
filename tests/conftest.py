"""Shared test fixtures: every anyio test runs on both asyncio and trio."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run each ``@pytest.mark.anyio`` test once per backend."""
    return str(request.param)
