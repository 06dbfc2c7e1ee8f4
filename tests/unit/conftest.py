"""Fixtures of the unit tests that run the tool server as a local process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.toolserver_process import ServerProcess


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def plan_dir(tmp_path: Path) -> Path:
    root = tmp_path / "plan"
    root.mkdir()
    return root


@pytest.fixture
def server(workspace: Path, plan_dir: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(workspace, plan_dir)
    yield process
    assert process.close() == 0
