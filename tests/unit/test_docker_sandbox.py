"""How a dead tool server is explained, and what the engine supports, with the Docker API
faked at its edge."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests

from sandbox_runner.sandbox.docker_sandbox import explain_death, supports_recursive_read_only


class FakeContainer:
    """Stands in for docker's Container: reload() yields the next state or raises."""

    def __init__(self, *states: dict[str, Any] | Exception) -> None:
        self.states = list(states)
        self.attrs: dict[str, Any] = {}
        self.id = "c0ffee"

    def reload(self) -> None:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if isinstance(state, Exception):
            raise state
        self.attrs = {"State": state}


class FakeEvents:
    """Stands in for docker's client where only the daemon's event log is asked."""

    def __init__(self, *events: dict[str, Any]) -> None:
        self.logged = list(events)
        self.asked: list[dict[str, Any]] = []

    def events(self, **query: Any) -> list[dict[str, Any]]:
        self.asked.append(query)
        return self.logged


def explain(tmp_path: Path, container: FakeContainer | None, docker_client: Any = None) -> str:
    return explain_death(container, docker_client, memory_mb=256, since=time.time())


@pytest.mark.parametrize(
    "states, expected",
    [
        (
            [{"Running": False, "OOMKilled": True, "ExitCode": 137}],
            "OOM-killed (memory limit 256 MB)",
        ),
        ([{"Running": False, "ExitCode": 3}], "the container exited with code 3"),
        ([{"Running": True}, {"Running": False, "ExitCode": 137}], "exited with code 137"),
        ([docker.errors.NotFound("gone")], "the container was removed"),
        (
            [requests.exceptions.ConnectionError("Connection refused")],
            "the Docker daemon stopped answering (Connection refused)",
        ),
    ],
)
def test_death_is_explained(tmp_path: Path, states: list[Any], expected: str) -> None:
    assert expected in explain(tmp_path, FakeContainer(*states))


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([{"Action": "oom"}, {"Action": "die"}], "OOM-killed (memory limit 256 MB)"),
        (
            [{"Action": "die", "Actor": {"Attributes": {"exitCode": "9"}}}],
            "the container exited with code 9",
        ),
        ([], "the container was removed"),
    ],
)
def test_death_of_a_removed_container_is_read_from_the_daemon_s_events(
    tmp_path: Path, events: list[dict[str, Any]], expected: str
) -> None:
    """Containers remove themselves when they stop, so the reason is in the event log."""
    daemon = FakeEvents(*events)
    gone = FakeContainer(docker.errors.NotFound("gone"))
    assert explain(tmp_path, gone, daemon) == expected
    assert daemon.asked[0]["filters"] == {"container": "c0ffee"}


def test_a_server_that_closes_its_output_in_a_live_container(tmp_path: Path) -> None:
    message = explain(tmp_path, FakeContainer({"Running": True}))
    assert message == "the tool server closed its output while the container still runs"


def test_a_stopped_sandbox_says_so(tmp_path: Path) -> None:
    assert explain(tmp_path, None) == "the sandbox was stopped"


class FakeApi:
    def __init__(self, version: str) -> None:
        self.api_version = version


class FakeClient:
    def __init__(self, version: str) -> None:
        self.api = FakeApi(version)


@pytest.mark.parametrize(
    ("version", "expected"),
    [("1.44", True), ("1.47", True), ("2.0", True), ("1.43", False), ("1.41", False), ("x", False)],
)
def test_recursive_read_only_needs_docker_25(version: str, expected: bool) -> None:
    """Docker 25 (API 1.44) is the first to make read-only binds read-only all the way down;
    with an older engine, a workspace with a mount below it is refused instead."""
    assert supports_recursive_read_only(FakeClient(version)) is expected
