"""The git guard in the tool server's container, for places beside the workspace: the
extra directories (walked like the workspace) and the writable /tmp (not walked)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docker.toolserver.test_toolserver_git import bash, git, marking
from tests.support.toolserver_process import ServerProcess


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


def test_a_repository_a_command_lays_out_in_tmp_is_guarded(
    start_server: Callable[..., ServerProcess],
    workspace: Path,
    plan_dir: Path,
    tmp_path: Path,
    markers: Path,
) -> None:
    """Any sandbox's commands can write /tmp: one copies a hostile repository there (a
    fixture unpacked for a test, say), the next runs git in it."""
    git(workspace, "init", "-q")
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    git(prepared, "init", "-q")
    (prepared / ".gitattributes").write_text("*.txt filter=planted\n")
    (prepared / "a.txt").write_text("one\n")
    git(prepared, "add", ".")
    git(prepared, "commit", "-qm", "one")
    program = marking(markers, "planted")
    with (prepared / ".git" / "config").open("a") as config:
        config.write(f'[filter "planted"]\n\tclean = {program}\n\tprocess = {program}\n')
    server = start_server(workspace, plan_dir, visible=[tmp_path], writable=[markers])
    try:
        copied = bash(server, f"cp -a {prepared} /tmp/x && touch -d 2001-01-01 /tmp/x/a.txt")
        assert copied[0] == 0, copied
        bash(server, "cd /tmp/x && git status")
        assert list(markers.iterdir()) == []
    finally:
        assert server.close() == 0


def test_a_repository_in_an_extra_directory_is_guarded(
    start_server: Callable[..., ServerProcess],
    workspace: Path,
    plan_dir: Path,
    tmp_path: Path,
    markers: Path,
) -> None:
    """A command can `cd` into an extra directory and run git there."""
    git(workspace, "init", "-q")
    lib = tmp_path / "extra" / "lib"
    lib.mkdir(parents=True)
    git(lib, "init", "-q")
    (lib / ".gitattributes").write_text("*.txt filter=extra\n")
    (lib / "a.txt").write_text("one\n")
    git(lib, "add", ".")
    git(lib, "commit", "-qm", "one")
    program = marking(markers, "extra")
    with (lib / ".git" / "config").open("a") as config:
        config.write(f'[filter "extra"]\n\tclean = {program}\n\tprocess = {program}\n')
    os.utime(lib / "a.txt", (978307200, 978307200))
    extra = ("--extra-dir", str(tmp_path / "extra"))
    server = start_server(workspace, plan_dir, *extra, visible=[tmp_path], writable=[markers])
    try:
        exit_code, output = bash(server, f"cd {lib} && git status")
        assert exit_code == 0, output
        assert list(markers.iterdir()) == []
        # The repository is live: git without planrun's settings runs its filter.
        bash(server, f"cd {lib} && env -i PATH=/usr/bin:/bin git -c safe.directory='*' status")
        assert [path.name for path in markers.iterdir()] == ["extra"]
    finally:
        assert server.close() == 0
