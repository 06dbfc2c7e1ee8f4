"""`planrun batch --engine ray` on a real local two-node Ray cluster (tests/support/ray_cluster):
a node whose Docker daemon and disk are its own gets the image through the object store and
runs the jobs the node without credentials may not; a killed node's job reruns elsewhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable
from tests.e2e.test_cli_batch import (
    ALL_JOBS,
    PERSPECTIVES,
    TASKS,
    CountingScript,
    batch_file,
    job_key,
)
from tests.e2e.test_cli_budget import ONE_TURN_USD
from tests.support.fake_messages_api import FakeMessagesAPI, Scripted, error
from tests.support.ray_cluster import Cluster, local_cluster, missing_ray
from tests.support.second_dockerd import (
    SecondDockerd,
    host_has_link,
    missing_dockerd,
    second_dockerd,
)

pytestmark = pytest.mark.ray
SESSION_LABEL = "io.planrun.session"


@pytest.fixture
def cluster(sandbox_image: str, planrun_home: Path) -> Iterator[Cluster]:
    """A cluster not started yet: each test gives each node its own environment."""
    if problem := missing_ray():
        unavailable(problem)
    with local_cluster(planrun_home) as started:
        yield started


@pytest.fixture
def other_daemon(docker_client: Any) -> Iterator[SecondDockerd]:
    """A second Docker daemon with its own disk, as on another host: no sandbox image. The
    host's docker0 (the main daemon's bridge) must be there after it stopped as before."""
    if problem := missing_dockerd():
        unavailable(problem)
    had_docker0 = host_has_link("docker0")
    with second_dockerd(docker_client) as daemon:
        yield daemon
    assert host_has_link("docker0") or not had_docker0, "the second dockerd deleted docker0"


def run_batch(cluster: Cluster, batch: Path, out: Path, *flags: str) -> subprocess.Popen[str]:
    """The driver, with no API key of its own: the nodes' keys are theirs."""
    command = [sys.executable, "-m", "sandbox_runner", "batch", str(batch), "--out", str(out)]
    command += ["--engine", "ray", "--address", cluster.address, "--json", *flags]
    env = {**cluster.env, "ANTHROPIC_API_KEY": ""}
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def ledger(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def created_containers(client: Any, session: str, since: float) -> int:
    """How many containers of the session the daemon created since then."""
    events = client.events(
        since=int(since),
        until=int(time.time()) + 1,
        filters={"type": "container", "event": "create", "label": f"{SESSION_LABEL}={session}"},
        decode=True,
    )
    return sum(1 for _ in events)


class FailsOneJob(CountingScript):
    """CountingScript, but one job's model calls are refused for good (HTTP 400)."""

    FAILING = f"{TASKS[-1]}/{PERSPECTIVES[-1]}"

    def __call__(self, body: dict[str, Any]) -> Scripted:
        answer = super().__call__(body)
        if job_key(body) == self.FAILING:
            return error(400, "invalid_request_error", "refused by the test")
        return answer


def test_a_node_without_the_image_or_a_shared_disk_gets_the_image_and_runs_the_jobs(
    cluster: Cluster,
    other_daemon: SecondDockerd,
    sample_repo: Path,
    tmp_path: Path,
    docker_client: Any,
    sandbox_image: str,
) -> None:
    node_home = tmp_path / "node-home"
    script = FailsOneJob(delay=0.0)
    started = time.time()
    with FakeMessagesAPI(script) as server:
        api = {"ANTHROPIC_BASE_URL": server.base_url}
        # The head shares the driver's engine and disk but has no key: it must be left out.
        # The worker has a key, its own daemon (without the image) and its own planrun home.
        cluster.start(
            {**api, "ANTHROPIC_API_KEY": ""},
            {
                **api,
                "ANTHROPIC_API_KEY": "node-key",
                "DOCKER_HOST": other_daemon.host,
                "PLANRUN_HOME": str(node_home),
            },
        )
        (_, head_id), (_, worker_id) = cluster.raylets()
        out = tmp_path / "out"
        process = run_batch(cluster, batch_file(tmp_path, sample_repo), out)
        stdout, stderr = process.communicate(timeout=180)
    assert process.returncode == 1, stderr[-3000:]  # one job's model call was refused
    assert "preparing 2 Ray node(s)" in stderr
    left_out = [line for line in stderr.splitlines() if "left out" in line]
    assert len(left_out) == 1 and head_id[:12] in left_out[0], stderr[-3000:]
    assert "no Anthropic credentials" in left_out[0]
    assert f"node {worker_id[:12]} (" in stderr and "loading the sandbox image (" in stderr
    assert "1 Ray node(s) ready, 1 sandbox slot(s)" in stderr

    # The image the worker's daemon now holds is exactly the driver's.
    shipped = other_daemon.client().images.get(sandbox_image).id
    assert shipped == docker_client.images.get(sandbox_image).id
    summary = json.loads(stdout)
    # Each task with two valid plans had its synthesis on the node too; the task whose
    # plan failed has one valid plan and none.
    syntheses = len(TASKS) - 1
    plans = len(TASKS) * len(PERSPECTIVES)
    assert summary["counts"] == {"complete": plans - 1 + syntheses, "failed": 1}
    records = ledger(out)
    assert all(worker_id[:12] in record["node"] for record in records), records
    # A refused model call fails its job once: Ray does not run it again (that would pay
    # twice), and every other job also ran exactly once.
    assert len(records) == plans + syntheses
    failed = [record["key"] for record in records if record["status"] != "complete"]
    assert failed == [FailsOneJob.FAILING]
    assert script.requests[FailsOneJob.FAILING] == 1
    # The sandboxes ran on the worker's daemon, from the repository copy on its own disk.
    session = f"batch-{out.name}"
    assert created_containers(other_daemon.client(), session, started) >= len(records)
    assert created_containers(docker_client, session, started) == 0
    assert len(list((node_home / "batch-cache" / "repos").glob("*/repo/src/app.py"))) == 1
    assert other_daemon.client().containers.list(all=True) == []


def test_ray_batch_survives_a_killed_node(
    cluster: Cluster, sample_repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    script = CountingScript(delay=1.0)
    with FakeMessagesAPI(script) as server:
        # The key lives in the nodes' environment, not in the driver's task arguments.
        nodes = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "node-key"}
        cluster.start(nodes, nodes)
        out = tmp_path / "out"
        process = run_batch(cluster, batch_file(tmp_path, sample_repo), out)
        # One sandbox slot per node: once two jobs have talked to the API, each node runs one.
        deadline = time.monotonic() + 60
        while len(script.requests) < 2 and time.monotonic() < deadline:
            if process.poll() is not None:
                break
            time.sleep(0.05)
        assert len(script.requests) >= 2, process.communicate(timeout=30)[1][-3000:]
        raylets = cluster.raylets()
        assert len(raylets) == 2
        killed, killed_node = raylets[-1]  # the worker node's raylet started last
        os.kill(killed, signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=90)
    assert process.returncode == 0, stderr[-3000:]
    assert "2 Ray node(s) ready, 2 sandbox slot(s)" in stderr
    summary = json.loads(stdout)
    assert summary["counts"] == {"complete": len(ALL_JOBS)}  # each task's synthesis too
    # The job that was mid-run on the killed node ran again, on the head, to completion:
    # its conversation was paid for more than once; every other job's exactly once.
    records = ledger(out)
    assert sorted(record["key"] for record in records) == sorted(script.requests)
    assert all(record["status"] == "complete" for record in records)
    once = min(script.requests.values())
    rerun = [key for key, count in script.requests.items() if count > once]
    assert len(rerun) == 1, script.requests  # one slot per node: one job was cut short
    nodes_of = {record["key"]: record["node"] for record in records}
    assert killed_node[:12] not in nodes_of[rerun[0]], nodes_of
    assert "is terminated" in stderr  # Ray's notice went to stderr; stdout is the JSON only
    # The killed attempt's container is collected by the next job's gc on the shared
    # Docker daemon, or at the latest by the driver's end.
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"{SESSION_LABEL}=batch-{out.name}"}
    )
    for container in leftovers:
        container.remove(force=True)
    assert leftovers == []
    # The same command again: every job is complete, nothing runs.
    again = run_batch(cluster, batch_file(tmp_path, sample_repo), out)
    stdout, stderr = again.communicate(timeout=60)
    assert again.returncode == 0, stderr[-3000:]
    assert json.loads(stdout)["counts"] == {"complete": len(ALL_JOBS)}
    assert len(ledger(out)) == len(records)


def test_a_ray_batch_ends_at_most_one_call_per_running_job_above_its_budget(
    cluster: Cluster, sample_repo: Path, tmp_path: Path
) -> None:
    script = CountingScript(delay=0.0)
    budget = 3 * ONE_TURN_USD  # each job takes 3 turns: the batch would take 18
    with FakeMessagesAPI(script) as server:
        nodes = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "node-key"}
        cluster.start(nodes, nodes)
        out = tmp_path / "out"
        batch = batch_file(tmp_path, sample_repo)
        process = run_batch(cluster, batch, out, "--max-cost-usd", f"{budget:.8f}")
        stdout, stderr = process.communicate(timeout=180)
    assert process.returncode == 1, stderr[-3000:]
    assert "2 Ray node(s) ready, 2 sandbox slot(s)" in stderr
    records = {record["key"]: record for record in ledger(out)}
    # Two slots: the first two jobs ran at once, each with half of the budget, and each
    # stopped after the call that spent its half (2 turns; without shares each would have
    # spent the whole budget, 3 turns). Nothing else started.
    first = [f"{TASKS[0]}/{label}" for label in PERSPECTIVES]
    assert sorted(script.requests.items()) == sorted(dict.fromkeys(first, 2).items())
    spent = sum(record["cost_usd"] or 0.0 for record in records.values())
    assert spent <= budget + 2 * ONE_TURN_USD
    assert {record["status"] for record in records.values()} == {"budget"}
    assert len(records) == len(TASKS) * len(PERSPECTIVES)
    for key, record in records.items():
        share = "this job's share of it" in record["reason"]
        assert share == (key in first), record["reason"]
    assert json.loads(stdout)["counts"] == {"budget": len(records)}
