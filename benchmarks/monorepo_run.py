"""One plan run on a generated monorepo, the model scripted (no LLM), and the host's own look
at the same tree that it is held to (see monorepo_bench).

The scripted plan looks around as a model does (Glob, Grep, `git log -5`, `git status`,
Read) and writes its plan; planrun's overhead is the run's wall time less the scripted
model's own time.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.monorepo import file_path
from sandbox_runner import Model
from sandbox_runner.runs.plan_job import SandboxFactory
from sandbox_runner.types import ModelCall, ModelRequest, ModelResponse

SESSION = "bench-monorepo"
GIT_COMMANDS = ("git log -5", "git status")
GIT_DISABLED = "git is disabled"


GREP_PATTERN = r"def value_42\b"
"""The scripted model's Grep: one file matches, so ripgrep reads every file of the tree."""


def repeats(size: int) -> int:
    """Measured runs per size (a million-file run takes minutes)."""
    return 3 if size <= 100_000 else 2


class TimedModel:
    """A model that adds up the time its calls take: the run's time that is not planrun's."""

    def __init__(self, model: Model, first_call_seconds: float = 0.0) -> None:
        self.model = model
        self.seconds = 0.0
        self.first_call_seconds = first_call_seconds
        """How long the first answer takes, as a real model's does (counted as the model's)."""
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest, call: ModelCall | None = None) -> ModelResponse:
        start = time.perf_counter()
        try:
            with self._lock:
                thinking, self.first_call_seconds = self.first_call_seconds, 0.0
            time.sleep(thinking)
            return self.model.complete(request, call)
        finally:
            self._add(time.perf_counter() - start)

    def count_tokens(self, request: ModelRequest) -> int:
        start = time.perf_counter()
        try:
            return self.model.count_tokens(request)
        finally:
            self._add(time.perf_counter() - start)

    def _add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


class ModelClock:
    """Makes a fresh scripted model per plan and adds up the time of all of them."""

    def __init__(self, first_call_seconds: float = 0.0) -> None:
        self.models: list[TimedModel] = []
        self.first_call_seconds = first_call_seconds

    def __call__(self, label: str) -> Model:
        model = TimedModel(scripted_plan(label), self.first_call_seconds)
        self.models.append(model)
        return model

    @property
    def seconds(self) -> float:
        return sum(model.seconds for model in self.models)


def plan_text() -> str:
    """A valid plan whose critical files exist in every generated repository."""
    from tests.unit.test_plan_loop import VALID_PLAN

    body = VALID_PLAN.split("### Critical Files for Implementation")[0]
    files = [file_path(0), file_path(1), "README.md"]
    entries = "".join(f"- {path} - named by the benchmark's plan\n" for path in files)
    return f"{body}### Critical Files for Implementation\n{entries}"


def scripted_plan(label: str) -> Model:
    """The scripted conversation of one plan: look around as a model does, write, stop."""
    from tests.support.scripted_model import ScriptedModel, reply, say, use

    return ScriptedModel(
        [
            reply(use("Glob", {"pattern": "**/*.py"})),
            reply(use("Grep", {"pattern": GREP_PATTERN})),
            *(reply(use("Bash", {"command": command})) for command in GIT_COMMANDS),
            reply(use("Read", {"file_path": f"/workspace/{file_path(0)}"})),
            reply(use("Write", {"file_path": f"/plan/{label}.md", "content": plan_text()})),
            reply(say(f"The plan is in /plan/{label}.md.")),
        ]
    )


def git_outputs(transcript: Path) -> dict[str, str]:
    """The output of each command the plan ran in Bash, as its transcript records it."""
    outputs = {}
    for line in transcript.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "tool_result" and entry.get("name") == "Bash":
            outputs[str(entry["input"]["command"])] = str(entry["content"])
    return outputs


def check_git_worked(transcript: Path) -> None:
    """Raise unless both git commands ran and answered with the repository's state."""
    outputs = git_outputs(transcript)
    for command in GIT_COMMANDS:
        output = outputs.get(command)
        if output is None:
            raise RuntimeError(f"`{command}` has no result in {transcript}")
        if GIT_DISABLED in output or "fatal:" in output:
            raise RuntimeError(f"`{command}` failed in the sandbox: {output.strip()[:300]}")
    if "Revision" not in outputs["git log -5"]:
        raise RuntimeError(f"`git log -5` shows no commit: {outputs['git log -5'][:300]}")


def host_look(repository: Path) -> float:
    """The baseline: the host's `git status --porcelain` and `find -printf` of the tree.

    --no-optional-locks keeps git from rewriting the index (the trees may be shared and
    read-only; the sandbox cannot write it either).
    """
    start = time.perf_counter()
    git = ["git", "--no-optional-locks", "status", "--porcelain"]
    subprocess.run(git, cwd=repository, capture_output=True, check=True)
    find = ["find", str(repository), "-printf", r"%p %s %T@\n"]
    subprocess.run(find, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def host_tools(repository: Path) -> float:
    """The host's time for the scripted model's own tool work: `rg -l` of its Grep pattern
    and `git status` (ripgrep is the Grep tool's engine in the sandbox too)."""
    start = time.perf_counter()
    grep = ["rg", "-l", "--no-config", "--hidden", "-e", GREP_PATTERN, "."]
    subprocess.run(grep, cwd=repository, stdout=subprocess.DEVNULL, check=False)
    git = ["git", "--no-optional-locks", "status", "--porcelain"]
    subprocess.run(git, cwd=repository, capture_output=True, check=True)
    return time.perf_counter() - start


def steps(transcript: Path, started: float, finished: float) -> tuple[tuple[str, float], ...]:
    """Where a run's time went, from its transcript's clock: before the agent's first entry
    (the tree's fingerprint, the first `git status`, setting up), each tool call (from the
    model's answer to the call's result; the first one waits for the container's start),
    and after the agent's result (the second `git status`, the fingerprint, the report)."""
    entries = [json.loads(line) for line in transcript.read_text().splitlines() if line]
    found = [("before the agent", entries[0]["time"] - started)]
    for previous, entry in itertools.pairwise(entries):
        if entry["type"] == "tool_result":
            name = entry["name"]
            label = entry["input"]["command"] if name == "Bash" else name
            found.append((label, entry["time"] - previous["time"]))
    found.append(("after the agent", finished - entries[-1]["time"]))
    return tuple(found)


@dataclass(frozen=True)
class RunSample:
    """One measured plan run: wall time, the model's part of it, the host's look, and
    where the time went (see steps)."""

    wall: float
    model: float
    baseline: float
    steps: tuple[tuple[str, float], ...] = ()
    host_tools: float = 0.0
    """What the model's own asks (its Grep of the whole tree and its `git status`) cost
    when the host runs the same commands: work any tool would do, not planrun's."""

    @property
    def overhead(self) -> float:
        """Everything but the model."""
        return self.wall - self.model

    @property
    def added(self) -> float:
        """What planrun adds: everything but the model and the host's cost of the same
        tool work."""
        return self.overhead - self.host_tools


def sandbox_factory(repository: Path, client: Any, session: str) -> SandboxFactory:
    """Sandboxes on REPOSITORY as `planrun plan` makes them (Services.sandbox_factory): a
    plan's, or (no plan directory) the throwaway one of `git status` before and after,
    each starting from the seed of the host's one walk of the repository."""
    from sandbox_runner.cli.services import Services
    from sandbox_runner.config import load_settings

    services = Services(docker=lambda: client, progress=lambda message: None)
    return services.sandbox_factory(repository, load_settings(repository))(session)


def plan_run(
    repository: Path,
    out_dir: Path,
    client: Any,
    image: str,
    baseline: float,
    first_call_seconds: float = 0.0,
) -> RunSample:
    """One plan run of one perspective on REPOSITORY, whose host look took BASELINE; the
    model's first answer takes FIRST_CALL_SECONDS (the rest come at once)."""
    from sandbox_runner.runs.multi import PlanRunSpec, execute

    spec = PlanRunSpec(
        requirements="Add a flag",
        workspace=repository,
        perspectives=["p0"],
        model_id="claude-sonnet-4-6",
        synthesis=False,
    )
    clock = ModelClock(first_call_seconds)
    out_dir.mkdir(parents=True)
    started, start = time.time(), time.perf_counter()
    sandboxes = sandbox_factory(repository, client, SESSION)
    outcome = execute(spec, out_dir, model_factory=clock, sandbox_factory=sandboxes)
    wall, finished = time.perf_counter() - start, time.time()
    transcript = out_dir / "p0.transcript.jsonl"
    problems = []
    if outcome.record.exit_code != 0:
        reasons = [result.reason for result in outcome.record.results if result.reason]
        problems.append(f"exit {outcome.record.exit_code}: {outcome.record.workspace_problem}")
        problems += reasons
    try:
        check_git_worked(transcript)
    except (RuntimeError, OSError) as failure:
        problems.append(str(failure))
    if problems:
        raise RuntimeError(f"the plan run failed: {'; '.join(problems)}")
    return RunSample(wall, clock.seconds, baseline, steps(transcript, started, finished))


def measure_size(
    repository: Path, scratch: Path, client: Any, image: str, size: int
) -> list[RunSample]:
    """Plan runs and host looks, taken in turn so that both share the machine's moments.

    The host reads every file first, and again before each run: a sandbox's reads of
    pages the host does not hold are charged to its memory limit (1 GB) and dropped as it
    goes, so a run on a cold tree leaves it cold for whatever is measured next."""
    host_look(repository)
    host_tools(repository)  # the page cache warmed for both sides
    if size <= 100_000:
        plan_run(repository, scratch / f"warm-{size}", client, image, 0.0)
    samples = []
    for attempt in range(repeats(size)):
        look = host_look(repository)
        tools = host_tools(repository)
        sample = plan_run(repository, scratch / f"run-{size}-{attempt}", client, image, look)
        samples.append(replace(sample, host_tools=tools))
    return samples
