"""The monorepo benchmarks' parts that need no Docker, on a generated tree of 200 files: the
generator, the shared root that is never remade, the host baseline, the proof that git
worked, the targets, and the figures of other modules when they are there or not."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks import monorepo_bench
from benchmarks.monorepo import ROOT_VARIABLE, ensure_repository, file_path, is_complete
from benchmarks.monorepo_bench import (
    git_guard_figures,
    largest_tree_figures,
    monorepos,
    run_figures,
)
from benchmarks.monorepo_run import RunSample, check_git_worked, host_look, plan_text, steps
from benchmarks.run import Figure
from sandbox_runner.plans.sections import DEFAULT_SECTIONS
from sandbox_runner.plans.validate import validate_plan

SIZE = 200


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_repository(SIZE, tmp_path_factory.mktemp("monorepos"))


def test_the_generator_makes_a_complete_repository_once_and_tells_its_progress(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    made = ensure_repository(SIZE, tmp_path, lines.append)
    assert len(list(made.rglob("*.py"))) == SIZE
    assert is_complete(made)
    log = subprocess.run(["git", "log", "--oneline"], cwd=made, capture_output=True, text=True)
    assert len(log.stdout.splitlines()) == 13
    assert lines[0].startswith(f"generating {SIZE} files")
    assert any("files written" in line for line in lines)
    assert lines[-1].endswith("is complete")
    again: list[str] = []
    assert ensure_repository(SIZE, tmp_path, again.append) == made
    assert again == []


def test_a_shared_root_is_used_as_it_is_never_made_or_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repository: Path
) -> None:
    unfinished = tmp_path / "files-300"
    (unfinished / ".git").mkdir(parents=True)
    (unfinished / "half-written.py").write_text("x = 1\n")
    (tmp_path / f"files-{SIZE}").symlink_to(repository)
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path))
    told: list[str] = []
    found = monorepos((SIZE, 300, 400), told.append)
    assert found == {SIZE: tmp_path / f"files-{SIZE}"}
    assert (unfinished / "half-written.py").exists()
    assert not (tmp_path / "files-400").exists()
    assert [line.split("/")[-1] for line in told] == [
        "files-300 is missing or not complete",
        "files-400 is missing or not complete",
    ]


def test_the_host_look_leaves_the_repository_alone(repository: Path) -> None:
    index = repository / ".git" / "index"
    before = index.stat().st_mtime_ns
    (repository / file_path(3)).touch()  # a stat change that git status would write back
    try:
        assert host_look(repository) > 0
        assert index.stat().st_mtime_ns == before
    finally:
        subprocess.run(["git", "update-index", "--refresh", "-q"], cwd=repository)


def test_the_scripted_plan_is_valid_in_a_generated_repository(repository: Path) -> None:
    check = validate_plan(plan_text(), sections=DEFAULT_SECTIONS, workspace=repository)
    assert check.ok, check.problems


def _transcript(path: Path, git_status_output: str) -> Path:
    git_log = "commit abc\n\n    Revision 12: adjust a few values"
    results = {"git log -5": git_log, "git status": git_status_output}
    entries: list[dict[str, Any]] = [{"type": "system", "time": 100.0}]
    for number, (command, output) in enumerate(results.items()):
        entries.append({"type": "assistant", "time": 101.0 + number})
        entries.append({"type": "tool_result", "time": 101.5 + number, "name": "Bash",
                        "input": {"command": command}, "content": output})  # fmt: skip
    entries.append({"type": "result", "time": 104.0})
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return path


def test_a_run_whose_git_was_disabled_does_not_count(tmp_path: Path) -> None:
    check_git_worked(_transcript(tmp_path / "good.jsonl", "On branch main\nnothing to commit"))
    disabled = "fatal: planrun: git is disabled in this sandbox: the scan failed"
    with pytest.raises(RuntimeError, match="git is disabled"):
        check_git_worked(_transcript(tmp_path / "bad.jsonl", disabled))


def test_the_steps_of_a_run_add_up_to_its_wall_time(tmp_path: Path) -> None:
    found = steps(_transcript(tmp_path / "t.jsonl", "clean"), started=99.0, finished=106.0)
    assert found == (
        ("before the agent", 1.0),
        ("git log -5", 0.5),
        ("git status", 0.5),
        ("after the agent", 2.0),
    )


@pytest.mark.parametrize(("overhead", "met"), [(4.9, True), (5.1, False)])
def test_a_larger_tree_may_cost_two_host_looks_more_than_the_smallest(
    monkeypatch: pytest.MonkeyPatch, overhead: float, met: bool
) -> None:
    runs = {1_000: RunSample(1.2, 0.2, 0.1), 100_000: RunSample(overhead + 0.1, 0.1, 2.0)}
    monkeypatch.setattr(monorepo_bench, "measure_size", lambda _r, _s, _c, _i, size: [runs[size]])
    reference, larger = run_figures(
        {1_000: Path("a"), 100_000: Path("b")}, Path("scratch"), None, "image", Figure
    )
    assert reference.met is True and reference.ratio is None
    assert larger.ratio == pytest.approx(overhead / 5.0)
    assert larger.met is met


def test_the_workspace_check_and_tool_figures_are_taken_on_the_largest_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import tools_scale, workspace_check

    seen: list[object] = []

    def workspace_check_figures(repository: Path) -> list[Any]:
        seen.append(repository)
        return [Figure("workspace check, walk", "1 s", "find 1 s", 1.0, "<= 5x find", True)]

    def tool_figures(repositories: dict[int, Path], figure: Any) -> list[Any]:
        seen.append(repositories)
        return [figure("Glob first page, 1,000,000 files", "0.01 s", "-", None, "< 1 s", True)]

    monkeypatch.setattr(workspace_check, "workspace_check_figures", workspace_check_figures)
    monkeypatch.setattr(tools_scale, "tool_figures", tool_figures)
    figures = largest_tree_figures({SIZE: Path("small"), 1_000_000: Path("large")}, Figure)
    assert seen == [Path("large"), {1_000_000: Path("large")}]
    assert [(figure.name, figure.met) for figure in figures] == [
        ("workspace check, walk, 1,000,000 files", True),
        ("Glob first page, 1,000,000 files", True),
    ]


def test_the_git_guard_is_measured_on_the_largest_repository(repository: Path) -> None:
    figures = git_guard_figures({2: Path("elsewhere"), SIZE: repository}, Figure)
    assert figures[0].name == f"git guard, first look, {SIZE:,} files"
    before = [figure for figure in figures if figure.name.startswith("git guard before")]
    # On a tree this small a command's fixed cost decides the ratio: it is shown, not held.
    target = "<= 10% of the command, held from 100,000 files"
    assert [(figure.target, figure.met) for figure in before] == [(target, None)] * 4
    assert all(figure.ratio is not None and figure.ratio > 0 for figure in figures)


def test_what_planrun_adds_leaves_out_the_model_and_the_host_s_cost_of_the_same_tool_work(
    repository: Path,
) -> None:
    sample = RunSample(wall=10.0, model=1.0, baseline=2.0, host_tools=3.0)
    assert sample.overhead == 9.0 and sample.added == 6.0
    from benchmarks.monorepo_run import host_tools

    assert 0.0 < host_tools(repository) < 30.0


def test_a_thinking_model_takes_its_time_on_the_first_answer_only_and_it_is_the_model_s() -> None:
    from benchmarks.monorepo_run import ModelClock
    from sandbox_runner.types import ModelRequest

    clock = ModelClock(first_call_seconds=0.2)
    model = clock("p0")
    request = ModelRequest(model="m", system="s", messages=[], tools=[])
    timings = []
    for _ in range(2):
        start = time.perf_counter()
        model.complete(request)
        timings.append(time.perf_counter() - start)
    assert timings[0] >= 0.2 > timings[1]
    assert clock.seconds >= 0.2
