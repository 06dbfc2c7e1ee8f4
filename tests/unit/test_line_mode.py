"""Line mode: the greeting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import Services, cli
from sandbox_runner.errors import DockerUnavailableError


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def test_the_greeting_names_the_mode_asked_for(workspace: Path) -> None:
    def no_docker() -> Any:
        raise DockerUnavailableError("not here")

    args = ["--repo", str(workspace), "--mode", "acceptEdits"]
    result = CliRunner().invoke(cli, args, obj=Services(docker=no_docker), input="")
    greeting = result.output.splitlines()[0]
    assert greeting.endswith("(acceptEdits mode); /help lists commands"), greeting
