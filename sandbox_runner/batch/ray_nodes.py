"""The prepare step of a Ray batch: one task pinned to each node that advertises sandboxes
checks planrun's version, the Docker engine, the API credentials (yes or no) and the image,
and removes containers of this batch's dead attempts; a node without the image gets the
driver's through the object store (or builds it). Only the nodes that pass run jobs."""

from __future__ import annotations

import functools
import hashlib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sandbox_runner.errors import ConfigError, DockerUnavailableError, PlanrunError
from sandbox_runner.safe_text import one_line
from sandbox_runner.sandbox.image_transfer import SavedImage

T = TypeVar("T")
Say = Callable[[str], None]
RESOURCE = "planrun_sandbox"
NODE_ID_LABEL = "ray.io/node-id"
"""The label Ray gives every node: a job's label selector names the nodes that passed."""
CHECK_SECONDS = 120.0
"""A node's checks: a worker process starts and imports planrun, Docker answers."""
IMAGE_SECONDS = 1800.0
"""Loading the image takes seconds; building it (no copy to ship) can take many minutes."""
NO_CREDENTIALS = (
    "no Anthropic credentials in the node's environment (ANTHROPIC_API_KEY, "
    "ANTHROPIC_AUTH_TOKEN or an Anthropic profile; set them where `ray start` runs)"
)


def call(work: Callable[[], T]) -> T:
    """What a Ray task runs: a picklable callable, so the task function never changes."""
    return work()


@dataclass(frozen=True)
class NodeExpectation:
    """What every node must match; no secrets (each node's credentials stay its own)."""

    version: str
    """planrun's version on the driver."""
    image: str
    """The sandbox image tag the jobs run."""
    session: str
    """The batch's container session label (`batch-<name>`), for collecting dead attempts."""
    buildable: bool
    """Whether the tag is planrun's own, which a node can build when nothing is shipped."""
    code: str = ""
    """A digest of planrun's code on the driver (the version alone names no build)."""
    image_id: str = ""
    """The image's ID on the driver ("" when it has none); a node must have the same one
    under a tag that is not planrun's own (such a tag can name anything)."""

    def acceptable(self, found_id: str) -> bool:
        """Whether the image a node has under the tag may run the jobs: planrun's own tag is
        content-addressed (a node's own build of it will do); any other must be the
        driver's very image, when the driver has one."""
        return self.buildable or not self.image_id or found_id == self.image_id


@functools.cache
def code_digest() -> str:
    """sha256 over planrun's files: its Python, the tool server, and what they read (the
    agents' prompts, the image inputs), the same from a wheel and from an editable install
    (which keeps the image inputs outside the package)."""
    from importlib import resources

    package = Path(__file__).resolve().parent.parent
    images = Path(str(resources.files("sandbox_runner.images"))).resolve()
    return tree_digest({"": package, "images/": images})


def tree_digest(trees: dict[str, Path]) -> str:
    """sha256 over the names and contents of the files under each tree, each named with its
    tree's prefix (a tree inside another counts once); bytecode caches left out."""
    found: dict[str, Path] = {}
    for prefix, root in trees.items():
        for path in root.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found[prefix + path.relative_to(root).as_posix()] = path
    digest = hashlib.sha256()
    for name, path in sorted(found.items()):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class NodeReport:
    """What one node's checks found: it runs jobs when problems is empty."""

    node_id: str
    host: str
    problems: tuple[str, ...] = ()
    image_missing: bool = False
    collected: int = 0
    """Containers of this batch's dead attempts that the check removed."""

    @property
    def name(self) -> str:
        return f"{self.node_id[:12]} ({self.host})"


def _here() -> NodeReport:
    import ray

    return NodeReport(str(ray.get_runtime_context().get_node_id()), socket.gethostname())


@dataclass(frozen=True)
class CheckNode:
    """Runs on one node: its checks; it changes nothing but removing dead attempts' containers."""

    expected: NodeExpectation

    def __call__(self) -> NodeReport:
        return self.check(_here())

    def check(self, here: NodeReport) -> NodeReport:
        """This machine's report, as the node `here` names."""
        from sandbox_runner import __version__
        from sandbox_runner.model.sdk_client import credentials_found
        from sandbox_runner.sandbox.docker_engine import connect
        from sandbox_runner.sandbox.docker_provider import collect_garbage
        from sandbox_runner.sandbox.image_transfer import image_id

        problems = []
        if __version__ != self.expected.version:
            problems.append(f"planrun {__version__} here, {self.expected.version} on the driver")
        elif self.expected.code and code_digest() != self.expected.code:
            problems.append(
                f"planrun's code here ({code_digest()[:12]}) differs from the driver's "
                f"({self.expected.code[:12]}): install the same planrun on every node"
            )
        if not credentials_found():
            problems.append(NO_CREDENTIALS)
        try:
            client = connect(timeout=30)
        except DockerUnavailableError as error:
            problems.append(f"no Docker engine: {error.reason}")
            return NodeReport(here.node_id, here.host, tuple(problems))
        collected = collect_garbage(client, session=self.expected.session)
        found = image_id(client, self.expected.image)
        if found is not None and not self.expected.acceptable(found):
            problems.append(
                f"{self.expected.image} here is {found[:19]}, not the driver's "
                f"{self.expected.image_id[:19]}"
            )
        missing = found is None
        return NodeReport(here.node_id, here.host, tuple(problems), missing, len(collected))


@dataclass(frozen=True)
class ProvideImage:
    """Runs on a node without the image: loads the driver's copy, checked, or builds it."""

    expected: NodeExpectation
    blob: Any = None
    """The object-store reference of the driver's `docker save` bytes; None: build."""
    image_id: str = ""
    digest: str = ""

    def __call__(self) -> NodeReport:
        return self.provide(_here())

    def provide(self, here: NodeReport) -> NodeReport:
        """Load or build the image on this machine, as the node `here` names; a problem
        when the tag does not then name an image the jobs may run."""
        from sandbox_runner.sandbox.docker_engine import connect
        from sandbox_runner.sandbox.image import build
        from sandbox_runner.sandbox.image_transfer import image_id, load_image

        tag = self.expected.image
        try:
            client = connect(timeout=300)
            found = image_id(client, tag)
            if found is not None and self.expected.acceptable(found):
                return here  # another batch got it here meanwhile
            if self.blob is not None:
                import ray

                data = ray.get(self.blob)
                load_image(client, data, tag=tag, expected_id=self.image_id, digest=self.digest)
            elif self.expected.buildable:
                build(client)
            else:
                problem = f"{tag} is not here, nor on the driver's engine to ship it"
                return NodeReport(here.node_id, here.host, (problem,))
            found = image_id(client, tag)
        except PlanrunError as error:
            return NodeReport(here.node_id, here.host, (f"no sandbox image: {error}",))
        if found is None or not self.expected.acceptable(found):
            problem = f"no sandbox image: {tag} is {found or 'still missing'} after providing it"
            return NodeReport(here.node_id, here.host, (problem,))
        return here


@dataclass
class NodePreparation:
    """The driver's side of the prepare step: which nodes, their checks, the image shipped."""

    ray: Any
    expected: NodeExpectation
    saved_image: Callable[[], SavedImage | None]
    """The driver's copy of the image, asked for only when some node lacks it."""
    say: Say
    warn: Say
    hosts: dict[str, str] = field(default_factory=dict)
    """Each node's host name, by node id: the nodes that advertise sandboxes."""
    slots: dict[str, int] = field(default_factory=dict)
    """Each of those nodes' sandbox slots."""

    def run(self) -> list[str]:
        """The ids of the nodes that passed; the others are reported, one line each.

        Raises:
            ConfigError: no node advertises the resource, or none passed.
        """
        for node in self.ray.nodes():
            slots = int(node.get("Resources", {}).get(RESOURCE, 0))
            if node.get("Alive") and slots >= 1:
                self.hosts[node["NodeID"]] = str(node.get("NodeManagerHostname", "?"))
                self.slots[node["NodeID"]] = slots
        if not self.hosts:
            raise ConfigError(
                f"no Ray node advertises {RESOURCE}; start nodes with "
                f"ray start ... --resources='{{\"{RESOURCE}\": N}}'"
            )
        self.say(f"preparing {len(self.hosts)} Ray node(s)…")
        reports = self._on_each(dict.fromkeys(self.hosts, CheckNode(self.expected)), CHECK_SECONDS)
        for report in reports.values():
            if report.collected:
                self.say(f"node {report.name}: removed {report.collected} dead container(s)")
        lacking = [n for n, r in reports.items() if r.image_missing and not r.problems]
        if lacking:
            reports |= self._provide_image(lacking, reports)
        for report in reports.values():
            if report.problems:
                self.warn(f"Ray node {report.name} left out: {'; '.join(report.problems)}")
        good = [node for node, report in reports.items() if not report.problems]
        if not good:
            raise ConfigError(
                f"no Ray node can run the batch: all {len(reports)} failed their checks (above)"
            )
        return good

    def _provide_image(
        self, lacking: list[str], reports: dict[str, NodeReport]
    ) -> dict[str, NodeReport]:
        saved = self.saved_image()
        if saved is None:
            work = ProvideImage(self.expected)
            doing = f"building the sandbox image {self.expected.image} (none here to ship)"
        else:
            # One copy in the object store, however many nodes fetch it.
            blob = self.ray.put(saved.data)
            work = ProvideImage(self.expected, blob, saved.image_id, saved.digest)
            doing = f"loading the sandbox image ({saved.size_mb:.0f} MB)"
        for node in lacking:
            self.say(f"node {reports[node].name}: {doing}…")
        started = time.monotonic()
        provided = self._on_each(dict.fromkeys(lacking, work), IMAGE_SECONDS)
        for report in provided.values():
            if not report.problems:
                elapsed = time.monotonic() - started
                self.say(f"node {report.name}: sandbox image ready ({elapsed:.1f} s)")
        return provided

    def _on_each(
        self, work: dict[str, Callable[[], NodeReport]], timeout: float
    ) -> dict[str, NodeReport]:
        """Run each node's work there (pinned, never retried); a failure is that node's."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = self.ray.remote(call)
        refs = {
            node: remote.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(unit)
            for node, unit in work.items()
        }
        ready, _ = self.ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
        reports = {}
        for node, ref in refs.items():
            host = self.hosts.get(node, "?")
            if ref not in ready:
                self.ray.cancel(ref, force=True)
                reports[node] = NodeReport(node, host, (f"did not answer within {timeout:.0f} s",))
                continue
            try:
                reports[node] = self.ray.get(ref)
            except Exception as error:  # the task's own error, or its node died
                last = str(error).strip().splitlines()[-1:] or [type(error).__name__]
                reports[node] = NodeReport(node, host, (f"the check failed: {one_line(last[0])}",))
        return reports
