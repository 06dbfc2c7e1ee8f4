"""Starting a Docker engine: stale pid files of a killed daemon do not block the next one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sandbox_runner.sandbox.docker_engine import remove_stale_pid_file


def test_a_pid_file_of_a_dead_process_is_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    pid_file = tmp_path / "docker.pid"
    pid_file.write_text(str(dead.pid))
    remove_stale_pid_file(pid_file)
    assert not pid_file.exists()


def test_a_pid_file_of_a_live_process_is_kept(tmp_path: Path) -> None:
    pid_file = tmp_path / "docker.pid"
    pid_file.write_text(str(os.getpid()))
    remove_stale_pid_file(pid_file)
    assert pid_file.exists()


def test_garbage_and_missing_pid_files_are_left_alone(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pid"
    garbage.write_text("not a pid")
    remove_stale_pid_file(garbage)
    remove_stale_pid_file(tmp_path / "missing.pid")
    assert garbage.exists()
