"""The monorepo benchmarks in real containers on a generated tree of 200 files: the scripted
plan run and a small batch succeed with git working in the sandbox, and say where the time
went. (`make bench` runs them on 1,000 to 1,000,000 files.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import monorepo_batch, monorepo_run
from benchmarks.monorepo import ensure_repository
from benchmarks.run import Figure


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return ensure_repository(200, tmp_path / "monorepos")


def test_a_scripted_plan_run_on_a_monorepo_succeeds_with_git_working(
    repository: Path, tmp_path: Path, docker_client: Any, sandbox_image: str,
    test_session: str, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(monorepo_run, "SESSION", test_session)
    monkeypatch.setattr(monorepo_run, "repeats", lambda size: 1)
    (sample,) = monorepo_run.measure_size(
        repository, tmp_path / "scratch", docker_client, sandbox_image, 200
    )
    assert 0 < sample.model < sample.wall
    assert sample.baseline > 0
    labels = [label for label, _ in sample.steps]
    assert labels == ["before the agent", "Glob", "Grep", "git log -5", "git status", "Read",
                      "Write", "after the agent"]  # fmt: skip
    assert sum(seconds for _, seconds in sample.steps) <= sample.wall


def test_a_small_batch_on_a_monorepo_is_held_to_the_reference(
    repository: Path, tmp_path: Path, docker_client: Any, sandbox_image: str,
    test_session: str, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(monorepo_batch, "SESSION", test_session)
    monkeypatch.setattr(monorepo_batch, "TASKS", 2)
    (figure,) = monorepo_batch.batch_figures(
        {200: repository}, tmp_path / "scratch", docker_client, sandbox_image, Figure
    )
    assert figure.met is True, figure.ours
    assert "s per job" in figure.ours and "model " in figure.ours
    assert figure.ours.endswith(" s per job)")  # the host's time for the same tool work
