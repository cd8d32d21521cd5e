"""The inspector's browser tests: real headless Chromium (skipped, with the install hint, where it is missing)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.inspector import browser_missing, chromium

MISSING = browser_missing()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if MISSING is None:
        return
    for item in items:
        if "tests/browser/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=MISSING))


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for every browser test of the run."""
    with chromium() as driver:
        yield driver
