"""Which repositories a Ray batch ships, and when: those of the jobs to run, before the
nodes are prepared (the cluster itself is faked at its edge: connect and prepare)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sandbox_runner.batch.ray_engine import RayEngine
from sandbox_runner.batch.setup import batch_jobs, decide_all, prepare_tasks
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.cli import cli
from sandbox_runner.errors import ConfigError
from tests.conftest import make_sample_repo
from tests.unit.test_batch import FakeWork, write

PREPARED = "the nodes were prepared"


class ObjectStore:
    """Ray's object store, as far as the driver puts repositories in it."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def put(self, blob: bytes) -> str:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
            self.events.append("put " + ",".join(sorted(archive.getnames())))
        return f"object-{len(self.events)}"

    def shutdown(self) -> None:
        pass


def test_only_repositories_with_jobs_to_run_are_shipped_and_before_the_nodes_are_prepared(
    tmp_path: Path, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (make_sample_repo(tmp_path / "done") / "done-marker.txt").write_text("finished earlier\n")
    (sample_repo / ".env").write_text("GITHUB_TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345\n")
    text = (
        "defaults: {perspectives: [a]}\n"
        "tasks:\n  - {id: t1, requirements: r, repo: repo}\n"
        "  - {id: t2, requirements: s, repo: done}\n"
    )
    batch_path = write(tmp_path / "batch.yaml", text)
    out = tmp_path / "out"
    _finish_task(batch_path, out, "t2")
    events: list[str] = []

    def prepare(engine: RayEngine, *args: Any) -> None:
        events.append(PREPARED)
        raise ConfigError("no Ray node can run the batch")

    monkeypatch.setattr(RayEngine, "connect", classmethod(lambda c, a, s: c(ObjectStore(events))))
    monkeypatch.setattr(RayEngine, "prepare", prepare)
    command = ["batch", str(batch_path), "--out", str(out), "--engine", "ray", "--address", "x:1"]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2, result.output
    assert len(events) == 2 and events[1] == PREPARED, result.output
    assert "./src/app.py" in events[0] and "done-marker" not in events[0]
    assert "./.env" not in events[0]  # a secret-looking name outside git stays behind


@pytest.mark.parametrize("synthesis_done", [True, False])
def test_a_task_whose_synthesis_is_left_to_make_ships_its_repository(
    tmp_path: Path, sample_repo: Path, monkeypatch: pytest.MonkeyPatch, synthesis_done: bool
) -> None:
    (make_sample_repo(tmp_path / "done") / "done-marker.txt").write_text("finished earlier\n")
    text = (
        "defaults: {perspectives: [a, b]}\n"
        "tasks:\n  - {id: t1, requirements: r, repo: repo}\n"
        "  - {id: t2, requirements: s, repo: done}\n"
    )
    batch_path = write(tmp_path / "batch.yaml", text)
    out = tmp_path / "out"
    # t2's plans are done; its synthesis too, or it stopped on an API error (to go on with).
    failing = set() if synthesis_done else {"recommended"}
    _finish_task(batch_path, out, "t2", FakeWork(failing, resumable=True))
    events: list[str] = []

    def prepare(engine: RayEngine, *args: Any) -> None:
        events.append(PREPARED)
        raise ConfigError("no Ray node can run the batch")

    monkeypatch.setattr(RayEngine, "connect", classmethod(lambda c, a, s: c(ObjectStore(events))))
    monkeypatch.setattr(RayEngine, "prepare", prepare)
    command = ["batch", str(batch_path), "--out", str(out), "--engine", "ray", "--address", "x:1"]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2, result.output
    shipped = [event for event in events if event.startswith("put ")]
    assert len(shipped) == (1 if synthesis_done else 2), events
    assert any("done-marker" in event for event in shipped) is not synthesis_done


def _finish_task(batch_path: Path, out: Path, task_id: str, work: FakeWork | None = None) -> None:
    """Run one task's jobs to completion with the local driver and a model that plans at once
    (WORK: one that plans so; its plans all valid)."""
    from sandbox_runner.batch.directory import open_batch_dir, record_run
    from sandbox_runner.batch.driver import BatchDriver
    from sandbox_runner.runs.executor import ThreadExecutor

    batch = load_batch_file(batch_path)
    tasks = [task for task in batch.tasks if task.id == task_id]
    prepared = prepare_tasks(batch, tasks, None, lambda _: None)
    out = open_batch_dir(out, [task.spec.workspace for task in prepared])
    record_run(out, batch.path, batch.digest, "local")
    jobs = decide_all(batch_jobs(prepared, out), out)
    driver = BatchDriver("b", out, jobs, ThreadExecutor(1), work or FakeWork(), scratch=out / "s")
    assert driver.run().exit_code == 0
