"""End-to-end tests: real containers, the real anthropic SDK, the fake Messages API server."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.fake_messages_api import FakeMessagesAPI


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.docker)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    """The fake Messages API, which the real SDK of every planrun started here talks to."""
    with FakeMessagesAPI() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield server
