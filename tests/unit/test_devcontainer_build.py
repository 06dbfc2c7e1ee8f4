"""A devcontainer Dockerfile cannot make the Docker daemon reach the network for it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from sandbox_runner.errors import ConfigError, ImageError
from sandbox_runner.sandbox.devcontainer import devcontainer_image, find_devcontainer
from sandbox_runner.sandbox.dockerfile_check import dockerfile_problem


class _Images:
    def __init__(self, present: set[str]) -> None:
        self.present = present

    def get(self, name: str) -> object:
        if name not in self.present:
            raise docker.errors.ImageNotFound(name)
        return object()


class _Api:
    def __init__(self) -> None:
        self.builds: list[dict[str, Any]] = []

    def build(self, **options: Any) -> list[dict[str, Any]]:
        self.builds.append(options)
        return []


class _Client:
    """The engine: the images it has, and the builds asked of it."""

    def __init__(self, present: set[str]) -> None:
        self.images = _Images(present)
        self.api = _Api()


def _repo(tmp_path: Path, dockerfile: str) -> Path:
    (tmp_path / ".devcontainer").mkdir()
    (tmp_path / ".devcontainer/Dockerfile").write_text(dockerfile)
    (tmp_path / ".devcontainer/devcontainer.json").write_text(
        '{"build": {"dockerfile": "Dockerfile"}}'
    )
    return tmp_path


@pytest.mark.parametrize(
    "dockerfile",
    [
        # The daemon downloads ADD's URL on the host's network: a host-only service.
        "FROM base:1\nADD http://127.0.0.1:8080/secret /secret\n",
        "FROM base:1\nadd \\\n  http://169.254.169.254/latest/meta-data/ /m\n",
        "# escape=`\nFROM base:1\nRUN true\nADD `\n http://10.0.0.1/ /x\n",
        # With ` as the escape, a backslash does not continue RUN's line into ADD's.
        "# syntax=docker/dockerfile:1\n# escape=`\n"
        "FROM base:1\nRUN echo \\\nADD http://10.0.0.1/ /x\n",
        # A registry the file names, the host's loopback included, is pulled from.
        "FROM 127.0.0.1:5000/private/image:1\n",
        "ARG BASE=127.0.0.1:5000/private/image:1\nFROM ${BASE}\n",
        "FROM base:1\nCOPY --from=127.0.0.1:5000/private/image:1 /etc/x /x\n",
        "FROM base:1\nONBUILD ADD http://127.0.0.1/ /x\n",
    ],
)
def test_a_dockerfile_that_would_reach_the_network_is_not_built(
    tmp_path: Path, dockerfile: str
) -> None:
    client = _Client({"base:1"})
    found = find_devcontainer(_repo(tmp_path, dockerfile))
    assert found is not None
    with pytest.raises(ConfigError, match="cannot build it without network"):
        devcontainer_image(client, found, lambda text: None)
    assert client.api.builds == []


def test_copy_stages_and_local_images_are_built(tmp_path: Path) -> None:
    dockerfile = (
        "FROM --platform=linux/amd64 base:1 AS tools\nRUN true\n"
        "# ADD in a comment\nFROM scratch\nCOPY --from=tools /bin /bin\nCOPY --from=0 /a /a\n"
        "COPY . /src\n"
    )
    client = _Client({"base:1"})
    found = find_devcontainer(_repo(tmp_path, dockerfile))
    assert found is not None
    assert devcontainer_image(client, found, lambda text: None) == found.tag()
    assert len(client.api.builds) == 1 and client.api.builds[0]["network_mode"] == "none"


def test_a_missing_base_image_is_named_with_how_to_get_it() -> None:
    problem = dockerfile_problem("FROM python:3.12-slim\n", lambda name: False)
    assert "docker pull python:3.12-slim" in problem


def test_a_changed_file_of_the_build_context_makes_a_new_tag(tmp_path: Path) -> None:
    # A pull request that changes only a script the Dockerfile copies and runs must not
    # leave its image behind under the tag the unchanged Dockerfile keeps using later.
    repo = _repo(tmp_path, "FROM base:1\nCOPY setup.sh /\nRUN sh /setup.sh\n")
    script = repo / ".devcontainer/setup.sh"
    script.write_text("echo main\n")
    found = find_devcontainer(repo)
    assert found is not None
    before = found.tag()
    script.write_text("echo from the pull request; plant a trojan\n")
    assert found.tag() != before
    script.write_text("echo main\n")
    (repo / ".devcontainer/extra").write_text("new file\n")
    assert found.tag() != before


def test_a_dockerfile_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    # A work session may write where .devcontainer/devcontainer.json points its Dockerfile
    # (outside the protected .devcontainer): a FIFO there would hang the next start.
    (tmp_path / ".devcontainer").mkdir()
    (tmp_path / ".devcontainer/devcontainer.json").write_text(
        '{"build": {"dockerfile": "../Dockerfile", "context": ".."}}'
    )
    os.mkfifo(tmp_path / "Dockerfile")
    found = find_devcontainer(tmp_path)
    assert found is not None
    outcome: list[BaseException] = []
    worker = threading.Thread(
        target=lambda: outcome.append(_raised(lambda: found.tag())), daemon=True
    )
    worker.start()
    worker.join(5)
    if worker.is_alive():
        with open(tmp_path / "Dockerfile", "wb"):  # unblock the reader
            pass
        pytest.fail("reading the Dockerfile hung on a FIFO")
    assert isinstance(outcome[0], ConfigError) and "not a regular file" in str(outcome[0])


def _raised(action: Callable[[], object]) -> BaseException:
    try:
        action()
    except BaseException as error:
        return error
    raise AssertionError("nothing was raised")


def test_an_unreadable_file_in_the_context_is_a_one_line_error(tmp_path: Path) -> None:
    # docker-py reads the context on the host; a file the session made unreadable there
    # (chmod 000, as a user other than root) raised a bare OSError: a traceback.
    class Unreadable(_Api):
        def build(self, **options: Any) -> list[dict[str, Any]]:
            raise OSError(f"Can not read file in context: {tmp_path}/secret")

    client = _Client({"base:1"})
    client.api = Unreadable()
    found = find_devcontainer(_repo(tmp_path, "FROM base:1\nCOPY . /src\n"))
    assert found is not None
    with pytest.raises(ImageError, match="Can not read file in context"):
        devcontainer_image(client, found, lambda text: None)


def test_a_build_context_1100_directories_deep_is_listed(tmp_path: Path) -> None:
    from sandbox_runner.sandbox.devcontainer import _context_listing
    from tests.support.deep_tree import deep_tree

    context = tmp_path / "context"
    with deep_tree(context, 1100) as deepest:
        (deepest / "f").write_text("x")
        listing = _context_listing(context)
    assert len(listing) == 1101 and listing[-1].split(b"\0")[0].endswith(b"/f")
