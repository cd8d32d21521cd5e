"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

import pytest

from acp_agent.testing.schema import SchemaValidator, default_schema_path


@pytest.fixture(scope="module")
def validator() -> SchemaValidator:
    """The official schema every message an agent writes is checked against."""
    if not default_schema_path().exists():
        pytest.fail("the official schema is missing: run `make test` (it runs npm ci in tests/interop)")
    return SchemaValidator()
