"""Fixtures of the tool-server tests: the server in a real sandbox container per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.toolserver_process import ServerProcess, leftover_containers


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
def start_server(sandbox_image: str) -> Iterator[Callable[..., ServerProcess]]:
    """Start tool servers in containers of the sandbox image; all are removed at teardown."""
    started: list[ServerProcess] = []

    def start(workspace: Path, plan_dir: Path, *extra: str, **options: Any) -> ServerProcess:
        process = ServerProcess(workspace, plan_dir, *extra, image=sandbox_image, **options)
        started.append(process)
        return process

    yield start
    for process in started:
        process.remove()
    assert not [name for name in leftover_containers() if name in {p.name for p in started}]


@pytest.fixture
def server(
    start_server: Callable[..., ServerProcess], workspace: Path, plan_dir: Path
) -> Iterator[ServerProcess]:
    process = start_server(workspace, plan_dir)
    yield process
    assert process.close() == 0
