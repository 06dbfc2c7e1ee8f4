"""Earlier runs: those in ~/.planrun/plans, and those written elsewhere with --out (an index)."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.files import UnsafeFileError, append_line, read_sandbox_file

INDEX_NAME = "runs.jsonl"
"""In planrun's home: one {"path", "recorded_at"} line per run written with --out."""
MAX_INDEX_BYTES = 4 * 1024 * 1024
MAX_REPORT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class RunSummary:
    """What `planrun plans list` shows of a run, read defensively from its report.json."""

    name: str
    path: Path
    has_report: bool = False
    started_at: str = ""
    status: str = ""
    exit_code: int | None = None
    requirements: str = ""
    perspectives: list[str] = field(default_factory=list)
    problem: str = ""
    """Why the report could not be read ("" when it could, or when there is none)."""


def is_being_written(directory: Path, lock_name: str = "run.lock") -> bool:
    """Whether a planrun process holds the run's lock now (a run being written or resumed)."""
    try:
        descriptor = os.open(directory / lock_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)
    return False


def runs_dir() -> Path:
    """Where `planrun plan` puts a run when no --out is given."""
    return planrun_home() / "plans"


def run_name(out_dir: Path) -> str:
    """What to type to name a run again: its name under ~/.planrun/plans, else its path."""
    return out_dir.name if out_dir.parent == runs_dir() else shlex.quote(str(out_dir))


def batches_dir() -> Path:
    """Where `planrun batch` puts a batch when no --out is given; each task of a batch is
    an ordinary run directory, `<batch>/tasks/<task id>/`."""
    return planrun_home() / "batches"


def index_path() -> Path:
    """The index of runs written outside runs_dir() with --out."""
    return planrun_home() / INDEX_NAME


def remember_run(out_dir: Path) -> None:
    """Add a run written with --out to the index, so `planrun plans` finds it."""
    if out_dir.parent == runs_dir():
        return
    planrun_home().mkdir(parents=True, exist_ok=True)
    recorded = datetime.now(UTC).isoformat(timespec="seconds")
    append_line(index_path(), json.dumps({"path": str(out_dir), "recorded_at": recorded}))


def run_directories() -> list[Path]:
    """Every run directory that still exists: runs_dir()'s, then the indexed ones."""
    root = runs_dir()
    # A hidden directory is planrun's own (the session plans' revisions), never a run.
    found = (
        [path for path in sorted(root.iterdir()) if path.is_dir() and path.name[:1] != "."]
        if root.is_dir()
        else []
    )
    if batches_dir().is_dir():
        found += sorted(path for path in batches_dir().glob("*/tasks/*") if path.is_dir())
    for path in _indexed():
        if path not in found and path.is_dir():
            found.append(path)
    return found


def _indexed() -> list[Path]:
    try:
        text = read_sandbox_file(index_path(), MAX_INDEX_BYTES) or ""
    except UnsafeFileError:
        return []
    paths = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            paths.append(Path(entry["path"]))
    return paths


def list_runs() -> list[RunSummary]:
    """Every run, newest first; a run whose report is missing or malformed is still listed."""
    runs = [summarise(directory) for directory in run_directories()]
    runs.sort(key=lambda run: run.started_at, reverse=True)
    return runs


def find_run(name: str) -> Path | None:
    """The run directory called name (the newest of that name), at that path, or a
    batch's task as `batch:<batch>/<task>`."""
    if name.startswith("batch:"):
        batch, _, task = name.removeprefix("batch:").partition("/")
        if not batch or not task or batch.startswith(".") or task.startswith(".") or "/" in task:
            return None
        path = batches_dir() / batch / "tasks" / task
        return path if (path / "report.json").is_file() else None
    if "/" in name:
        path = Path(name).expanduser()
        is_run = (path / "report.json").is_file() or (path / "run.json").is_file()
        return path.resolve() if is_run else None
    if name.startswith(".") or not name:
        return None
    matches = [run.path for run in list_runs() if run.name == name]
    return matches[0] if matches else None


def run_named(name: str) -> Path:
    """The run directory `name` stands for (see find_run).

    Raises:
        ConfigError: no run is called that.
    """
    directory = find_run(name)
    if directory is None:
        known = ", ".join(run.name for run in list_runs()[:10]) or "none yet"
        raise ConfigError(f"no run called {name!r} in {runs_dir()} (recent: {known})")
    return directory


def run_document(directory: Path, perspective: str | None) -> str:
    """A run's report.md, or with `perspective`, that plan.

    Raises:
        ConfigError: not a perspective's name, no such file, or one planrun will not read.
    """
    if perspective is not None and ("/" in perspective or perspective.startswith(".")):
        raise ConfigError(f"{perspective!r} is not a perspective of this run")
    target = directory / (f"{perspective}.md" if perspective else "report.md")
    try:
        text = read_sandbox_file(target)
    except UnsafeFileError as error:
        raise ConfigError(str(error)) from None
    if text is None:
        plans_here = ", ".join(
            p.stem for p in sorted(directory.glob("*.md")) if p.name != "report.md"
        )
        raise ConfigError(f"{target} does not exist (plans in this run: {plans_here or 'none'})")
    return text


def report_page(directory: Path) -> Path:
    """A run's report.html.

    Raises:
        ConfigError: the run has none.
    """
    page = directory / "report.html"
    if not page.is_file():
        raise ConfigError(f"{page} does not exist: the run was written before report.html was")
    return page


def summarise(directory: Path) -> RunSummary:
    """The run's summary; every field is type-checked, since a report file can hold anything."""
    try:
        text = read_sandbox_file(directory / "report.json", MAX_REPORT_BYTES)
    except UnsafeFileError as error:
        return RunSummary(directory.name, directory, problem=str(error))
    if text is None:
        return RunSummary(directory.name, directory)
    try:
        report = json.loads(text)
    except ValueError as error:
        return RunSummary(directory.name, directory, True, problem=f"report.json: {error}")
    if not isinstance(report, dict):
        return RunSummary(directory.name, directory, True, problem="report.json is not an object")
    exit_code = report.get("exit_code")
    return RunSummary(
        name=directory.name,
        path=directory,
        has_report=True,
        started_at=_text(report.get("started_at")),
        status=_text(report.get("status")) or "?",
        exit_code=exit_code if isinstance(exit_code, int) else None,
        requirements=_text(report.get("requirements")),
        perspectives=_perspectives(report.get("plans")),
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _perspectives(plans: Any) -> list[str]:
    if not isinstance(plans, list):
        return []
    names = []
    for plan in plans:
        if isinstance(plan, dict):
            name = _text(plan.get("perspective")) or _text(plan.get("label"))
            if name:
                names.append(name)
    return names
