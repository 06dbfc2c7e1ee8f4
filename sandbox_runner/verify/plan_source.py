"""Which plan file `planrun verify PLAN` means: a path, a run (its recommended plan, or
its only plan), or a session's plan file (`~/.planrun/plans/NAME.md`)."""

from __future__ import annotations

from pathlib import Path

from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import MAX_PLAN_BYTES
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.history import find_run
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

__all__ = ["plan_file", "read_plan"]

RUN_FILES = frozenset({"report.md"})
"""Markdown files of a run directory that are no plan."""


def plan_file(name: str) -> Path:
    """The plan file PLAN stands for.

    Raises:
        ConfigError: PLAN is no plan file, run or session plan, or a run with several
            plans and no recommended one.
    """
    path = Path(name).expanduser()
    if path.is_file():
        return path
    run = find_run(name)
    if run is None and path.is_dir():
        run = path
    if run is not None:
        return _run_plan(run, name)
    if name and "/" not in name and not name.startswith("."):
        session_plan = planrun_home() / "plans" / f"{name.removesuffix('.md')}.md"
        if session_plan.is_file():
            return session_plan
    raise ConfigError(
        f"{name!r} is not a plan file, a run (`planrun plans list`) or a session's plan"
    )


def _run_plan(run: Path, name: str) -> Path:
    recommended = run / "recommended.md"
    if recommended.is_file():
        return recommended
    plans = sorted(p for p in run.glob("*.md") if p.name not in RUN_FILES and p.is_file())
    if len(plans) == 1:
        return plans[0]
    listed = ", ".join(p.stem for p in plans) or "none"
    raise ConfigError(
        f"run {name!r} has {len(plans)} plans ({listed}) and no recommended plan; "
        f"name one: planrun verify {run}/PERSPECTIVE.md"
    )


def read_plan(path: Path) -> str:
    """The plan's text (bounded; no FIFO, device or link).

    Raises:
        ConfigError: it cannot be read, or is empty.
    """
    try:
        data = read_untrusted_bytes(path, MAX_PLAN_BYTES, follow_symlinks=False)
    except UnsafeFileError as error:
        raise ConfigError(str(error)) from None
    text = (data or b"").decode("utf-8", "replace")
    if not text.strip():
        raise ConfigError(f"{path} is empty: there is no plan to verify")
    return text
