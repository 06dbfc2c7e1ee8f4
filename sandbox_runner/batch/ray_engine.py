"""The Ray engine of a batch (optional extra `planrun[ray]`): each job is a Ray task on one of
the nodes that advertise the `planrun_sandbox` resource and passed the prepare step
(ray_nodes); the repository travels as a tarball through the object store. The API key
is each node's own: never in arguments or runtime_env."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import logging
import os
import queue
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from sandbox_runner import Sandbox, __version__
from sandbox_runner.batch.driver import WorkFor
from sandbox_runner.batch.job import JobOutcome, JobPayload, run_job, sent_back
from sandbox_runner.batch.ray_nodes import (
    NODE_ID_LABEL,
    RESOURCE,
    NodeExpectation,
    NodePreparation,
    Say,
    call,
    code_digest,
)
from sandbox_runner.batch.setup import BatchJob
from sandbox_runner.batch.shipping.tarball import node_copy, repo_tarball
from sandbox_runner.errors import ConfigError, DockerUnavailableError
from sandbox_runner.limits import Limits
from sandbox_runner.paths import planrun_home
from sandbox_runner.runs.executor import Announced
from sandbox_runner.sandbox.image_transfer import SavedImage

T = TypeVar("T")
NODE_RETRIES = 2
"""Ray re-runs a job whose node or worker died; never one that raised (that would pay twice)."""


def node_repository(blob_ref: Any, digest: str) -> contextlib.AbstractContextManager[Path]:
    """The node's cached copy of a shipped repository, in use while the block runs (see
    shipping.tarball.node_copy)."""
    import ray

    cache = planrun_home() / "batch-cache" / "repos"
    return node_copy(cache, digest, lambda: bytes(ray.get(blob_ref)))


@dataclass(frozen=True)
class RemoteJob:
    """One job as shipped to a node: picklable, no secrets."""

    payload: JobPayload
    repo_ref: Any
    repo_digest: str
    image: str
    """The tag the prepare step checked on every node that runs jobs."""
    limits: Limits
    session: str

    def __call__(self) -> JobOutcome:
        # The copy stays in use (never pruned) until the job's sandboxes are gone.
        with node_repository(self.repo_ref, self.repo_digest) as workspace:
            outcome = self._run(workspace)
        # Several nodes may share a host name: the Ray node id tells them apart.
        return replace(outcome, node=f"{outcome.node} ray:{_node_id()[:12]}")

    def _run(self, workspace: Path) -> JobOutcome:
        from sandbox_runner.sandbox.docker_engine import connect
        from sandbox_runner.sandbox.docker_provider import collect_garbage
        from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
        from sandbox_runner.sandbox.image import require_image
        from sandbox_runner.sandbox.spec import SandboxSpec

        client = connect()
        # Containers of attempts whose worker died with its node (this host only).
        collect_garbage(client, session=self.session)
        image = require_image(client, self.image)

        def sandboxes(plan_dir: Path | None) -> Sandbox:
            if plan_dir is None:
                spec = SandboxSpec.probe(workspace, image, (), self.limits, session=self.session)
            else:
                spec = SandboxSpec.plan(
                    workspace, plan_dir, image, (), self.limits,
                    session=self.session, agent=plan_dir.name,
                )  # fmt: skip
            return DockerSandbox(spec, client)

        with tempfile.TemporaryDirectory(prefix="planrun-batch-") as scratch:
            outcome = run_job(
                replace(self.payload, workspace=workspace),
                sandbox_factory=sandboxes,
                scratch_root=Path(scratch),
            )
            return sent_back(outcome)


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def job_options(nodes: list[str]) -> dict[str, Any]:
    """How every job is submitted: one sandbox slot on a node that passed the prepare step;
    retried when its node or worker dies, never when it raised (a rerun pays the model again)."""
    return {
        "num_cpus": 0,
        "resources": {RESOURCE: 1},
        "label_selector": {NODE_ID_LABEL: f"in({','.join(nodes)})"},
        "max_retries": NODE_RETRIES,
        "retry_exceptions": False,
    }


class RayExecutor:
    """Ray tasks behind the Executor seam; at most `parallel` submitted at once."""

    def __init__(self, ray: Any, parallel: int, nodes: list[str]) -> None:
        self._ray = ray
        self._remote = ray.remote(call).options(**job_options(nodes))
        self._slots = threading.Semaphore(max(1, parallel))
        self._queue: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._cancelled = threading.Event()
        self._in_flight: set[Any] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._dispatch, name="ray-dispatch", daemon=True).start()

    @property
    def cancelled(self) -> threading.Event:
        return self._cancelled

    def submit(self, name: str, work: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((work, future))
        return future

    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            refs = list(self._in_flight)
        for ref in refs:
            self._ray.cancel(ref, force=True)

    def _dispatch(self) -> None:
        while True:
            work, future = self._queue.get()
            self._slots.acquire()
            if self._cancelled.is_set():
                future.cancel()
                self._slots.release()
                continue
            if not future.set_running_or_notify_cancel():
                self._slots.release()
                continue
            try:
                if isinstance(work, Announced):
                    # The driver's bookkeeping runs here; only the job itself is shipped.
                    work.on_start()
                    work = work.work
                ref = self._remote.remote(work)
            except BaseException as error:  # e.g. not picklable: the job fails, loudly
                self._slots.release()
                future.set_exception(error)
                continue
            with self._lock:
                self._in_flight.add(ref)
            ref.future().add_done_callback(lambda done, r=ref, f=future: self._settle(r, f, done))

    def _settle(self, ref: Any, future: Future[Any], done: Future[Any]) -> None:
        with self._lock:
            self._in_flight.discard(ref)
        self._slots.release()
        error = done.exception()
        if isinstance(error, self._ray.exceptions.RayTaskError) and error.cause is not None:
            error = error.cause  # the job's own exception, without the remote traceback
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(done.result())


@dataclass
class RayEngine:
    """A connected Ray cluster: its prepared nodes, the executor, how jobs become Ray work."""

    ray: Any
    image: str = ""
    """The sandbox image every prepared node holds."""
    nodes: list[str] = field(default_factory=list)
    """The ids of the nodes that passed the prepare step: the only ones that run jobs."""
    slots: int = 0
    """The sandbox slots of those nodes: how many jobs run at once at most."""
    _executor: RayExecutor | None = None

    @classmethod
    def connect(cls, address: str | None, say: Say) -> RayEngine:
        """Connect to the cluster at address (or RAY_ADDRESS).

        Raises:
            ConfigError: no address, or no connection.
        """
        ray: Any = importlib.import_module("ray")
        address = address or os.environ.get("RAY_ADDRESS")
        if not address:
            raise ConfigError(
                "--engine ray needs --address (or RAY_ADDRESS): auto, host:port or ray://"
            )
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except Exception as error:
            raise ConfigError(f"cannot connect to Ray at {address}: {error}") from None
        say(f"connected to the Ray cluster at {address}")
        return cls(ray)

    def prepare(
        self, batch: str, jobs: list[BatchJob], docker: Callable[[], Any], say: Say, warn: Say
    ) -> None:
        """Check every node that advertises sandboxes, give the image to those that lack it
        (the driver's copy, from this machine's engine through docker, or a build there),
        and keep the nodes that passed.

        Raises:
            ConfigError: no node advertises sandboxes, or none passed.
        """
        from sandbox_runner.sandbox.image import image_tag

        # The image is the operator's setting (a batch file or project cannot choose it).
        self.image = jobs[0].task.settings.settings.image or image_tag()
        expected = NodeExpectation(
            __version__,
            self.image,
            f"batch-{batch}",
            self.image == image_tag(),
            code=code_digest(),
            image_id=_driver_image_id(docker, self.image),
        )
        saved = functools.partial(_saved_image, docker, self.image, say)
        preparation = NodePreparation(self.ray, expected, saved, say, warn)
        self.nodes = preparation.run()
        self.slots = sum(preparation.slots[node] for node in self.nodes)
        say(f"{len(self.nodes)} Ray node(s) ready, {self.slots} sandbox slot(s)")

    def executor(self, parallel: int) -> RayExecutor:
        """The executor of this batch's jobs (after prepare: only its nodes run them)."""
        if self._executor is None:
            self._executor = RayExecutor(self.ray, parallel, self.nodes)
        return self._executor

    def close(self) -> None:
        """Disconnect from the cluster (its nodes keep running)."""
        if self._executor is not None:
            self._executor.cancel()
        self.ray.shutdown()

    def work_for(self, batch: str, jobs: list[BatchJob], out_dir: Path) -> WorkFor:
        """Each job becomes a RemoteJob; each distinct repository is packed and put in the
        store once, all of them before any job is submitted (a repository that cannot be
        packed is a usage error before anything runs).

        Raises:
            ConfigError: a repository cannot be packed, or is too large.
        """
        shipped: dict[Path, tuple[Any, str]] = {}
        for workspace in dict.fromkeys(job.payload.workspace for job in jobs):
            exclude = out_dir if out_dir.is_relative_to(workspace) else None
            blob = repo_tarball(workspace, exclude)
            shipped[workspace] = (self.ray.put(blob), hashlib.sha256(blob).hexdigest())

        def work(job: BatchJob) -> Callable[[], JobOutcome]:
            ref, digest = shipped[job.payload.workspace]
            limits = job.task.settings.limits()
            return RemoteJob(job.payload, ref, digest, self.image, limits, f"batch-{batch}")

        return work


def _driver_image_id(docker: Callable[[], Any], tag: str) -> str:
    """The image's ID on this machine's engine ("" without an engine or the image)."""
    from sandbox_runner.sandbox.image_transfer import image_id

    try:
        return image_id(docker(), tag) or ""
    except DockerUnavailableError:
        return ""


def _saved_image(docker: Callable[[], Any], tag: str, say: Say) -> SavedImage | None:
    """This machine's copy of the image to ship, or None (no engine here, or no such image)."""
    from sandbox_runner.sandbox.image_transfer import image_id, save_image

    try:
        client = docker()
    except DockerUnavailableError:
        return None
    if image_id(client, tag) is None:
        return None
    say(f"saving the sandbox image {tag} from this machine's engine…")
    return save_image(client, tag)
