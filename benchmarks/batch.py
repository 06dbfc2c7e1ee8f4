"""Batch figures for `make bench`: the overhead per job of the local engine and of Ray (two
local nodes), and the resume decision."""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandbox_runner.batch.driver import BatchDriver
from sandbox_runner.batch.engines import local_work_for
from sandbox_runner.batch.ledger import Ledger, LedgerRecord
from sandbox_runner.batch.resume import Action
from sandbox_runner.batch.setup import batch_jobs, decide_all, prepare_tasks
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.runs.executor import ThreadExecutor
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import SandboxSpec

JOBS, PARALLEL, TASKS = 32, 8, 16
RAY_SLOTS = 1
"""Sandbox slots per Ray node, as many as its CPUs (each node is given one of this machine's
two): each slot is a worker process that imports planrun and the SDK (~1.5 s of CPU)."""
RESUME_JOBS = 10_000


def _batch(scratch: Path, repo: Path, tasks: int) -> Path:
    # Plan jobs only, as the figures have always counted them: no task's synthesis.
    defaults = f"{{repo: {repo}, perspectives: [p0, p1], overrides: {{synthesis: false}}}}"
    lines = [f"defaults: {defaults}", "tasks:"]
    lines += [f"  - {{id: t{n}, requirements: Plan task {n}}}" for n in range(tasks)]
    path = scratch / f"batch-{tasks}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def bench_batch_local(
    repo: Path, scratch: Path, client: Any, image: str, session: str, Figure: Any
) -> Any:
    """32 jobs at --parallel 8, the model answering at once, real containers: wall time
    per job, everything included (containers, tool calls, commits, ledger, reports)."""
    from sandbox_runner.model.anthropic_model import AnthropicModel
    from tests.support.fake_messages_api import FakeMessagesAPI
    from tests.support.plan_scripts import PerspectiveScript, writes_plan
    from tests.unit.test_plan_loop import VALID_PLAN

    batch = load_batch_file(_batch(scratch, repo, TASKS))
    prepared = prepare_tasks(batch, batch.tasks, PARALLEL, lambda _: None)
    out = scratch / "batch-out"
    out.mkdir()
    jobs = decide_all(batch_jobs(prepared, out), out)

    def sandboxes(plan_dir: Path | None) -> DockerSandbox:
        if plan_dir is None:
            return DockerSandbox(SandboxSpec.probe(repo, image, session=session), client)
        spec = SandboxSpec.plan(repo, plan_dir, image, session=session, agent=plan_dir.name)
        return DockerSandbox(spec, client)

    script = PerspectiveScript({label: writes_plan(label, VALID_PLAN) for label in ("p0", "p1")})
    with FakeMessagesAPI(script) as api:
        executor = ThreadExecutor(PARALLEL)
        work = local_work_for(lambda _: sandboxes, out / ".scratch", executor.cancelled)

        def work_for(job: Any) -> Any:
            unit = work(job)
            assert isinstance(unit, functools.partial)
            model = AnthropicModel("claude-sonnet-4-6", api_key="b", base_url=api.base_url)
            return lambda: unit.func(*unit.args, **{**unit.keywords, "model": lambda _: model})

        start = time.perf_counter()
        outcome = BatchDriver("bench", out, jobs, executor, work_for).run()
        elapsed = time.perf_counter() - start
    if outcome.exit_code != 0:
        raise RuntimeError(f"bench batch failed: {outcome.summary['counts']}")
    per_job = elapsed / JOBS
    target = 0.25
    return Figure(
        f"batch of {JOBS} jobs, local engine, --parallel {PARALLEL}, model answering at once",
        f"{elapsed:.1f} s in all, {per_job:.2f} s per job",
        "3 model turns, 2 tool calls and one container per job; 2 CPUs shared",
        per_job / target,
        f"<= {target:.2f} s per job",
        per_job <= target,
    )


def bench_resume_decision(repo: Path, scratch: Path, Figure: Any) -> Any:
    """Deciding what to skip when 10,000 jobs are recorded complete."""
    batch = load_batch_file(_batch(scratch, repo, 1))
    prepared = prepare_tasks(batch, batch.tasks, None, lambda _: None)
    out = scratch / "resume-out"
    out.mkdir()
    template = batch_jobs(prepared, out)[0]
    jobs = []
    ledger = Ledger(out)
    lines = []
    for n in range(RESUME_JOBS):
        payload = replace(template.payload, key=f"t{n // 2}/p{n % 2}", task_id=f"t{n // 2}")
        jobs.append(replace(template, payload=payload))
        record = LedgerRecord(payload.key, template.fingerprint, "complete", 1, tokens=1000)
        lines.append(record.to_json())
    ledger.path.write_text("\n".join(lines) + "\n")
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        decided = decide_all(jobs, out)
        samples.append(time.perf_counter() - start)
    assert all(job.decision.action is Action.SKIP_COMPLETE for job in decided)
    best = min(samples)
    target = 1.0
    return Figure(
        f"resume decision, {RESUME_JOBS:,} finished jobs",
        f"{best:.2f} s",
        "ledger read + one decision per job",
        best / target,
        f"<= {target:.1f} s",
        best <= target,
    )


def bench_batch_ray(repo: Path, scratch: Path, client: Any, Figure: Any) -> Any:
    """The same 32 jobs on a two-node local Ray cluster, the model answering at once: what
    planrun adds per job over Ray itself running 32 empty tasks the same way, on the same
    cluster in the same run (best of two each). Starting the cluster is not counted;
    connecting, the prepare step, shipping the repository and the jobs are."""
    from tests.support.fake_messages_api import FakeMessagesAPI
    from tests.support.plan_scripts import PerspectiveScript, writes_plan
    from tests.support.ray_cluster import local_cluster, missing_ray
    from tests.unit.test_plan_loop import VALID_PLAN

    if problem := missing_ray():
        raise RuntimeError(problem)
    script = PerspectiveScript({label: writes_plan(label, VALID_PLAN) for label in ("p0", "p1")})
    home = scratch / "ray-home"
    home.mkdir()
    with FakeMessagesAPI(script) as api, local_cluster(home) as cluster:
        node_env = {"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "bench"}
        started = time.perf_counter()
        cluster.start(node_env, node_env, slots=RAY_SLOTS)
        cluster_start = time.perf_counter() - started
        baselines, runs = [], []
        with _driver_environment(cluster.env):
            for attempt in range(2):
                baselines.append(_ray_alone(cluster.address))
                runs.append(_ray_batch(repo, scratch / f"ray-{attempt}", client, cluster.address))
    elapsed, baseline = min(runs), min(baselines)
    per_job = (elapsed - baseline) / JOBS
    target = 0.5
    return Figure(
        f"batch of {JOBS} jobs, Ray engine, 2 local nodes of 1 CPU and {RAY_SLOTS} slot each, "
        "model at once",
        f"{elapsed:.1f} s in all, {per_job:.2f} s per job over the baseline",
        f"Ray alone (connect, {JOBS} empty tasks, disconnect): {baseline:.1f} s; "
        f"cluster start ({cluster_start:.0f} s) not counted",
        per_job / target,
        f"<= {target:.2f} s per job",
        per_job <= target,
    )


@contextlib.contextmanager
def _driver_environment(env: dict[str, str]) -> Iterator[None]:
    """This process is the driver: it needs the cluster's token settings while connected."""
    names = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_USAGE_STATS_ENABLED")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update({name: env[name] for name in names})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _ray_alone(address: str) -> float:
    """Connect, run JOBS empty tasks as planrun submits its jobs, disconnect."""
    from sandbox_runner.batch.ray_engine import job_options
    from sandbox_runner.batch.ray_nodes import RESOURCE, call

    ray: Any = importlib.import_module("ray")
    start = time.perf_counter()
    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    nodes = [node["NodeID"] for node in ray.nodes() if node["Resources"].get(RESOURCE)]
    remote = ray.remote(call).options(**job_options(nodes))
    ray.get([remote.remote(int) for _ in range(JOBS)])
    ray.shutdown()
    return time.perf_counter() - start


def _ray_batch(repo: Path, scratch: Path, client: Any, address: str) -> float:
    """The batch driver on Ray, in this process: connect, prepare, run, disconnect."""
    from sandbox_runner.batch.ray_engine import RayEngine

    scratch.mkdir()
    batch = load_batch_file(_batch(scratch, repo, TASKS))
    prepared = prepare_tasks(batch, batch.tasks, PARALLEL, lambda _: None)
    out = scratch / "batch-ray-out"
    out.mkdir()
    jobs = decide_all(batch_jobs(prepared, out), out)
    start = time.perf_counter()
    engine = RayEngine.connect(address, lambda _: None)
    try:
        engine.prepare(out.name, jobs, lambda: client, lambda _: None, print)
        executor = engine.executor(PARALLEL)
        outcome = BatchDriver(
            out.name, out, jobs, executor, engine.work_for(out.name, jobs, out)
        ).run()
    finally:
        engine.close()
    elapsed = time.perf_counter() - start
    if outcome.exit_code != 0:
        reasons = {job["reason"] for job in outcome.summary["jobs"] if job["reason"]}
        raise RuntimeError(f"bench batch on Ray failed: {outcome.summary['counts']} {reasons}")
    return elapsed
