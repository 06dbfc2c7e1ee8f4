"""`planrun batch`: plan many tasks from several perspectives, resumably; `batch status`."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from sandbox_runner.batch.driver import BatchDriver, NoEvents, WorkFor
from sandbox_runner.batch.job import JobOutcome
from sandbox_runner.batch.ledger import batch_lock
from sandbox_runner.batch.output import (
    open_batch_dir,
    record_run,
    scratch_root,
)
from sandbox_runner.batch.resume import RUNS, Action
from sandbox_runner.batch.setup import (
    BatchJob,
    PreparedTask,
    batch_jobs,
    decide_all,
    prepare_tasks,
    select_tasks,
    task_dir,
)
from sandbox_runner.batch.summary import read_status
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.cli.app import cli, reports_errors, services, warn
from sandbox_runner.cli.batch_progress import BatchProgress
from sandbox_runner.cli.progress import wants_live_display
from sandbox_runner.errors import ConfigError
from sandbox_runner.model import check_model_options
from sandbox_runner.plans.history import batches_dir, remember_run
from sandbox_runner.runs.executor import Executor, ThreadExecutor
from sandbox_runner.runs.workspace import GitStatusRunner
from sandbox_runner.safe_text import one_line

RAY_HINT = "the Ray engine needs Ray: pip install 'planrun[ray]'"


class _BatchGroup(click.Group):
    """`planrun batch FILE ...` runs a batch; `planrun batch status DIR` reads one."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().resolve_command(ctx, args)


@cli.group("batch", cls=_BatchGroup, short_help="Plan many tasks (a batch file).")
def batch() -> None:
    """Plan every task of a batch file (YAML or JSONL) from its perspectives.

    \b
    planrun batch FILE [--out DIR] [--engine local|ray] [--parallel N] [--retry-failed]
                       [--redo ID]... [--only REGEX] [--dry-run] [--json]
    planrun batch status DIR [--json]

    Run the same command again to resume: finished plans are never redone.
    """


@batch.command("run", short_help="Run (or resume) a batch; `planrun batch FILE` does this.")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Batch directory.")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--address", help="Ray cluster address (auto, host:port, ray://...).")
@click.option("--parallel", type=click.IntRange(1, 256), help="Jobs running at once.")
@click.option("--retry-failed", is_flag=True, help="Run failed jobs again (old attempt kept).")
@click.option("--redo", "redo", multiple=True, help="Run task ID again although it changed.")
@click.option("--only", help="Only the tasks whose id matches this regular expression.")
@click.option("--dry-run", is_flag=True, help="Say what would run, run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json only.")
@click.pass_context
@reports_errors
def batch_run(ctx: click.Context, /, **options: Any) -> None:
    """Exit status: 0 every job complete and valid; 1 some failed; 2 usage (a bad batch
    file, a changed task, another driver); 3 a workspace changed; 130 interrupted."""
    batch_file = load_batch_file(options["file"])
    tasks = select_tasks(batch_file, options["only"])
    prepared = prepare_tasks(batch_file, tasks, options["parallel"], warn)
    workspaces = sorted({task.prepared.spec.workspace for task in prepared})
    if options["engine"] == "ray":
        _require_ray()
    if options["dry_run"]:
        _dry_run(prepared, options)
        return
    if options["engine"] == "local":
        # The API key is this machine's (with Ray, each node's own).
        check_model_options(None, None, [], os.environ)
    out_dir = open_batch_dir(options["out_dir"], workspaces)
    with batch_lock(out_dir):
        jobs = decide_all(
            batch_jobs(prepared, out_dir),
            out_dir,
            retry_failed=options["retry_failed"],
            redo=options["redo"],
        )
        to_run = [job for job in jobs if job.decision.action in RUNS]
        record_run(out_dir, batch_file.path, batch_file.digest, options["engine"])
        _remember(out_dir, prepared)
        with _stdout_to_stderr() if options["engine"] == "ray" else contextlib.nullcontext():
            code, summary = _drive(ctx, out_dir, jobs, to_run, prepared, workspaces, options)
    if options["as_json"]:
        click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        _print_summary(summary)
    ctx.exit(code)


def _drive(
    ctx: click.Context,
    out_dir: Path,
    jobs: list[BatchJob],
    to_run: list[BatchJob],
    prepared: list[PreparedTask],
    workspaces: list[Path],
    options: dict[str, Any],
) -> tuple[int, dict[str, Any]]:
    svc = services(ctx)
    parallel = options["parallel"] or prepared[0].prepared.spec.parallel
    skipped = len(jobs) - len(to_run)
    if not options["as_json"]:
        click.echo(
            f"planrun: batch {out_dir.name}: {len(to_run)} job(s) to run, {skipped} done or "
            f"skipped earlier, into {out_dir}",
            err=True,
        )
    live = wants_live_display(sys.stderr, json_output=options["as_json"])
    progress = BatchProgress(len(to_run), skipped, live=live) if not options["as_json"] else None
    executor: Executor
    git_for: Callable[[Path], GitStatusRunner | None] = _no_git
    with contextlib.ExitStack() as disconnect:
        if options["engine"] == "ray":
            executor, work_for = _ray(ctx, out_dir, to_run, options, parallel, disconnect)
        else:
            thread_executor = ThreadExecutor(parallel)
            executor = thread_executor
            work_for, git_for = _local(ctx, out_dir, to_run, workspaces, progress, thread_executor)
        driver = BatchDriver(
            out_dir.name,
            out_dir,
            jobs,
            executor,
            work_for,
            events=progress or NoEvents(),
            stop_sandboxes=svc.stop_sandboxes,
            on_stop=progress.stopping if progress else lambda: None,
            scratch=scratch_root(out_dir, workspaces),
            git_for=git_for,
        )
        with progress or contextlib.nullcontext():
            outcome = driver.run()
    if outcome.interrupted and not options["as_json"]:
        click.echo("planrun: interrupted; run the same command to resume", err=True)
    return outcome.exit_code, outcome.summary


def _no_git(workspace: Path) -> GitStatusRunner | None:
    """The Ray engine's driver may have no Docker: its repositories' files are compared."""
    return None


def _ray(
    ctx: click.Context,
    out_dir: Path,
    to_run: list[BatchJob],
    options: dict[str, Any],
    parallel: int,
    disconnect: contextlib.ExitStack,
) -> tuple[Executor, WorkFor]:
    """Connect, ship the repositories of the jobs to run, prepare the nodes (only those that
    pass run jobs); with nothing to run (every job done or skipped), no cluster is needed."""
    from sandbox_runner.batch.ray_engine import RayEngine

    if not to_run:
        return ThreadExecutor(parallel), _nothing_to_run
    svc = services(ctx)
    engine = RayEngine.connect(options["address"], svc.progress)
    disconnect.callback(engine.close)
    # A repository that cannot be packed stops the batch in seconds, before the nodes are
    # prepared (an image can take minutes to ship or build); finished ones are not packed.
    work_for = engine.work_for(out_dir.name, to_run, out_dir)
    engine.prepare(out_dir.name, to_run, svc.docker, svc.progress, warn)
    return engine.executor(parallel), work_for


def _nothing_to_run(job: BatchJob) -> Callable[[], JobOutcome]:
    raise AssertionError(f"{job.key} is not to run")


def _local(
    ctx: click.Context,
    out_dir: Path,
    to_run: list[BatchJob],
    workspaces: list[Path],
    progress: BatchProgress | None,
    executor: ThreadExecutor,
) -> tuple[WorkFor, Callable[[Path], GitStatusRunner | None]]:
    """The local engine's work, and how `git status` of each repository is taken (in a
    throwaway sandbox of a task of that repository)."""
    from sandbox_runner.batch.local_engine import local_work_for
    from sandbox_runner.runs.git_probe import git_in_sandbox
    from sandbox_runner.sandbox.docker_provider import collect_garbage

    svc = services(ctx)
    # Containers of an earlier driver of this batch that died (SIGKILL, a crash).
    collect_garbage(svc.docker(), session=f"batch-{out_dir.name}")
    factories = {}
    for job in to_run:
        task_id = job.payload.task_id
        if task_id not in factories:
            # Docker, the image and the workspace's readability are checked before any job.
            spec = job.task.prepared
            factories[task_id] = svc.sandbox_factory(spec.spec.workspace, spec.settings)(
                f"batch-{out_dir.name}"
            )
    probes = {job.payload.workspace: factories[job.payload.task_id] for job in to_run}
    work_for = local_work_for(
        lambda job: factories[job.payload.task_id],
        scratch_root(out_dir, workspaces),
        executor.cancelled,
        progress.agent_event if progress else None,
    )

    def git_for(workspace: Path) -> GitStatusRunner | None:
        factory = probes.get(workspace)
        return None if factory is None else git_in_sandbox(factory)

    return work_for, git_for


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """While Ray is connected, whatever is written to stdout goes to stderr.

    Ray's driver prints cluster events (such as "Raylet is terminated") to stdout from a
    thread of its own; stdout must carry only planrun's output (`--json` stays parseable).
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _require_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError(RAY_HINT) from None


def _dry_run(prepared: list[PreparedTask], options: dict[str, Any]) -> None:
    requested = options["out_dir"]
    out_dir = requested.expanduser().resolve() if requested is not None else None
    jobs = batch_jobs(prepared, out_dir)
    going_on: set[str] = set()
    if out_dir is not None and out_dir.is_dir():
        jobs = decide_all(jobs, out_dir, retry_failed=options["retry_failed"], redo=options["redo"])
        going_on = _going_on(jobs, out_dir, [task.prepared.spec.workspace for task in prepared])
    rows = [
        {"key": job.key, "action": job.decision.action.value, "goes_on": job.key in going_on}
        for job in jobs
    ]
    if options["as_json"]:
        click.echo(json.dumps({"dry_run": True, "jobs": rows}, indent=2))
        return
    for row in rows:
        action = str(row["action"]) + (" (goes on)" if row["goes_on"] else "")
        click.echo(one_line(f"{action:<18} {row['key']}"))
    runs = sum(1 for job in jobs if job.decision.action in RUNS)
    click.echo(f"{runs} of {len(jobs)} job(s) would run", err=True)


def _going_on(jobs: list[BatchJob], out_dir: Path, workspaces: list[Path]) -> set[str]:
    """The jobs that would go on with an earlier conversation (see batch.salvage)."""
    from sandbox_runner.batch.ledger import Ledger
    from sandbox_runner.batch.salvage import would_go_on

    records = Ledger(out_dir).last_by_key()
    scratch = scratch_root(out_dir, workspaces)
    keys = set()
    for job in jobs:
        if job.decision.action not in (Action.RUN, Action.RETRY):
            continue
        retry_resumable = None
        if job.decision.action is Action.RETRY:
            record = records.get(job.key, (None, 0))[0]
            retry_resumable = record is not None and record.result.get("resumable") is True
        directory = task_dir(out_dir, job.payload.task_id)
        if would_go_on(directory, job.label, job.fingerprint, retry_resumable, scratch):
            keys.add(job.key)
    return keys


def _remember(out_dir: Path, prepared: list[PreparedTask]) -> None:
    """Let `planrun plans list` find the batch's task directories."""
    if out_dir.parent == batches_dir():
        return
    for task in prepared:
        directory = task_dir(out_dir, task.task.id)
        if not directory.exists():
            directory.mkdir(parents=True)
            remember_run(directory)


def _print_summary(summary: dict[str, Any]) -> None:
    width = min(max((len(job["key"]) for job in summary["jobs"]), default=0), 40)
    for job in summary["jobs"]:
        # One line per job; the whole reason is in summary.md and summary.json.
        reason = str(job["reason"]) if job["status"] != "complete" else ""
        reason = f" ({reason[:97]}…)" if len(reason) > 100 else (f" ({reason})" if reason else "")
        click.echo(one_line(f"  {job['key']:<{width}}  {job['status']:<10}{reason}".rstrip()))
    counts = ", ".join(f"{status} {n}" for status, n in summary["counts"].items())
    click.echo(one_line(f"Batch {summary['batch']}: {counts}"))
    click.echo(one_line(f"Summary: {Path(summary['out_dir']) / 'summary.md'}"))


@batch.command("status")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@reports_errors
def batch_status(directory: Path, as_json: bool) -> None:
    """What a batch directory holds: counts by status, failed jobs (no engine, no Docker)."""
    candidate = directory if directory.is_dir() else batches_dir() / str(directory)
    status = read_status(candidate.expanduser())
    if status is None:
        raise ConfigError(f"{directory} is not a batch directory (no summary.json, no ledger)")
    if as_json:
        click.echo(json.dumps(status, indent=2, ensure_ascii=False))
        return
    counts = ", ".join(f"{s} {n}" for s, n in status["counts"].items()) or "nothing recorded"
    click.echo(one_line(f"Batch {status.get('batch')}: {status.get('state')}; {counts}"))
    for key in status["failed"]:
        click.echo(one_line(f"  failed: {key}"))
    if status["failed"]:
        click.echo("Run again with --retry-failed to retry the failed jobs.")
