"""The second Docker daemon of the Ray tests (tests/support/second_dockerd) leaves the host's
network alone: started with --bridge=none in the host's network namespace, it deleted the
main daemon's docker0, and every container on the default network and every build with a
RUN step failed until that daemon restarted."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import unavailable
from tests.support.second_dockerd import (
    host_has_link,
    missing_dockerd,
    network_namespace,
    second_dockerd,
)


@pytest.fixture
def docker0() -> Iterator[None]:
    """The host's docker0; where there is none, a stand-in bridge of that name, removed
    afterwards (a daemon with --bridge=none deletes whichever it finds)."""
    if problem := missing_dockerd():
        unavailable(problem)
    stand_in = not host_has_link("docker0")
    if stand_in:
        subprocess.run(["ip", "link", "add", "docker0", "type", "bridge"], check=True)
    try:
        yield
    finally:
        if stand_in and host_has_link("docker0"):
            subprocess.run(["ip", "link", "delete", "docker0"], check=False)


def test_the_second_daemon_has_a_network_of_its_own_and_docker0_survives(
    docker_client: Any, docker0: None
) -> None:
    with second_dockerd(docker_client) as daemon:
        assert host_has_link("docker0"), "the second dockerd deleted the host's docker0"
        assert daemon.client().info()["DockerRootDir"] == str(daemon.root / "data")
        assert network_namespace(daemon.process.pid) != network_namespace(os.getpid())
    assert host_has_link("docker0"), "docker0 is gone after the second dockerd stopped"
