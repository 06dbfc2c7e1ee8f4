"""The Ray prepare step without a cluster: which nodes run jobs, what is shipped where, what a
node's check reports, and how jobs are submitted (retried on node death only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from sandbox_runner import __version__
from sandbox_runner.batch.ray_engine import NODE_RETRIES, job_options
from sandbox_runner.batch.ray_nodes import (
    NO_CREDENTIALS,
    CheckNode,
    NodeExpectation,
    NodePreparation,
    NodeReport,
    ProvideImage,
    code_digest,
    tree_digest,
)
from sandbox_runner.errors import ConfigError
from sandbox_runner.sandbox.image_transfer import SavedImage

EXPECTED = NodeExpectation(__version__, "planrun-sandbox:0123456789ab", "batch-b", True)
SAVED = SavedImage(EXPECTED.image, "sha256:" + "c" * 64, bytes(3_000_000), "d" * 64)
HANGS = None
A, B, C = ("a" * 56, "b" * 56, "c" * 56)
"""Node ids: Ray's are 56 hex digits."""


@dataclass(frozen=True)
class Ref:
    node: str
    kind: type


class FakeCluster:
    """Ray at the outermost edge: its nodes, pinned tasks answered from a script per node
    and kind of work (a report, an exception, or HANGS), and the object store."""

    def __init__(self, answers: dict[tuple[str, type], NodeReport | Exception | None]) -> None:
        self.answers = answers
        self.submitted: list[tuple[str, Any, dict[str, Any]]] = []
        self.puts: list[bytes] = []
        self.cancelled: list[Ref] = []

    def nodes(self) -> list[dict[str, Any]]:
        ids = dict.fromkeys(node for node, _ in self.answers)
        listed = [
            {"NodeID": node, "Alive": True, "NodeManagerHostname": f"host-{node[0]}",
             "Resources": {"CPU": 2.0, "planrun_sandbox": 2.0}}
            for node in ids
        ]  # fmt: skip
        dead = {"NodeID": "dead", "Alive": False, "Resources": {"planrun_sandbox": 1.0}}
        no_slots = {"NodeID": "plain", "Alive": True, "Resources": {"CPU": 8.0}}
        return [*listed, dead, no_slots]

    def remote(self, function: Any) -> FakeCluster:
        return self

    def options(self, **options: Any) -> PinnedTask:
        return PinnedTask(self, options)

    def put(self, data: bytes) -> str:
        self.puts.append(data)
        return f"object-{len(self.puts)}"

    def wait(
        self, refs: list[Ref], num_returns: int, timeout: float
    ) -> tuple[list[Ref], list[Ref]]:
        ready = [ref for ref in refs if self.answers[(ref.node, ref.kind)] is not HANGS]
        return ready, [ref for ref in refs if ref not in ready]

    def get(self, ref: Ref) -> NodeReport:
        answer = self.answers[(ref.node, ref.kind)]
        if isinstance(answer, Exception):
            raise answer
        assert answer is not None
        return answer

    def cancel(self, ref: Ref, force: bool) -> None:
        self.cancelled.append(ref)


@dataclass
class PinnedTask:
    cluster: FakeCluster
    options: dict[str, Any]

    def remote(self, work: Any) -> Ref:
        node = self.options["scheduling_strategy"].node_id
        self.cluster.submitted.append((node, work, self.options))
        return Ref(node, type(work))


def ok(node: str, image_missing: bool = False) -> NodeReport:
    return NodeReport(node, f"host-{node[0]}", image_missing=image_missing)


def prepare(
    cluster: FakeCluster, saved: SavedImage | None = SAVED
) -> tuple[list[str], list[str], list[str], list[str]]:
    """Run the prepare step; the nodes kept, progress lines, warnings, images saved."""
    said: list[str] = []
    warned: list[str] = []
    asked: list[str] = []

    def saved_image() -> SavedImage | None:
        asked.append("saved")
        return saved

    nodes = NodePreparation(cluster, EXPECTED, saved_image, said.append, warned.append).run()
    return nodes, said, warned, asked


def test_a_node_without_credentials_is_left_out_in_one_line_and_the_others_run_jobs() -> None:
    cluster = FakeCluster(
        {
            (A, CheckNode): ok(A),
            (B, CheckNode): NodeReport(B, "host-b", (NO_CREDENTIALS,)),
        }
    )
    nodes, said, warned, asked = prepare(cluster)
    assert nodes == [A]
    assert said[0] == "preparing 2 Ray node(s)…"  # dead nodes and nodes without slots: no
    assert warned == [f"Ray node {B[:12]} (host-b) left out: {NO_CREDENTIALS}"]
    assert asked == [] and cluster.puts == []  # every node had the image: nothing shipped
    # One check per node, pinned to it, never retried (a node lost mid-check is left out).
    for node, work, options in cluster.submitted:
        strategy = options["scheduling_strategy"]
        assert (strategy.node_id, strategy.soft) == (node, False)
        assert options["max_retries"] == 0 and options["num_cpus"] == 0
        assert work == CheckNode(EXPECTED)
    assert sorted(node for node, _, _ in cluster.submitted) == [A, B]


def test_the_drivers_image_is_put_once_and_loaded_only_where_it_is_missing() -> None:
    cluster = FakeCluster(
        {
            (A, CheckNode): ok(A, image_missing=True),
            (B, CheckNode): ok(B, image_missing=True),
            (C, CheckNode): ok(C),
            (A, ProvideImage): ok(A),
            (B, ProvideImage): NodeReport(B, "host-b", ("no sandbox image: disk full",)),
        }
    )
    nodes, said, warned, asked = prepare(cluster)
    assert nodes == [A, C]
    assert asked == ["saved"] and cluster.puts == [SAVED.data]
    loads = [(node, work) for node, work, _ in cluster.submitted if isinstance(work, ProvideImage)]
    assert [node for node, _ in loads] == [A, B]
    assert all(
        (work.blob, work.image_id, work.digest) == ("object-1", SAVED.image_id, SAVED.digest)
        for _, work in loads
    )
    assert "node aaaaaaaaaaaa (host-a): loading the sandbox image (3 MB)…" in said
    assert any(
        line.startswith("node aaaaaaaaaaaa (host-a): sandbox image ready (") for line in said
    )
    assert warned == ["Ray node bbbbbbbbbbbb (host-b) left out: no sandbox image: disk full"]


def test_without_a_copy_on_the_driver_the_node_builds_the_image() -> None:
    cluster = FakeCluster({(A, CheckNode): ok(A, image_missing=True), (A, ProvideImage): ok(A)})
    nodes, said, _, _ = prepare(cluster, saved=None)
    assert nodes == [A] and cluster.puts == []
    assert cluster.submitted[-1][1] == ProvideImage(EXPECTED)
    building = f"building the sandbox image {EXPECTED.image} (none here to ship)…"
    assert f"node {A[:12]} (host-a): {building}" in said


def test_a_node_that_hangs_or_whose_check_dies_is_left_out() -> None:
    cluster = FakeCluster(
        {
            (A, CheckNode): ok(A),
            (B, CheckNode): HANGS,
            (C, CheckNode): RuntimeError("Traceback ...\nModuleNotFoundError: no sandbox_runner"),
        }
    )
    nodes, _, warned, _ = prepare(cluster)
    assert nodes == [A]
    assert cluster.cancelled == [Ref(B, CheckNode)]
    assert warned == [
        "Ray node bbbbbbbbbbbb (host-b) left out: did not answer within 120 s",
        f"Ray node {C[:12]} (host-c) left out: the check failed: "
        "ModuleNotFoundError: no sandbox_runner",
    ]


def test_when_no_node_passes_the_batch_stops_before_any_job() -> None:
    cluster = FakeCluster({(A, CheckNode): NodeReport(A, "host-a", ("no Docker engine",))})
    with pytest.raises(ConfigError, match="no Ray node can run the batch"):
        prepare(cluster)
    with pytest.raises(ConfigError, match="no Ray node advertises planrun_sandbox"):
        prepare(FakeCluster({}))


def test_a_nodes_check_reports_every_problem_it_has(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))  # no profile found either
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no.sock'}")
    other = NodeExpectation("0.0.0-other", EXPECTED.image, "batch-b", True)
    report = CheckNode(other).check(NodeReport("n", "host-n"))
    assert report.problems[0] == f"planrun {__version__} here, 0.0.0-other on the driver"
    assert report.problems[1] == NO_CREDENTIALS
    assert report.problems[2].startswith("no Docker engine: no engine socket at unix://")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "a token")
    assert NO_CREDENTIALS not in CheckNode(other).check(NodeReport("n", "host-n")).problems


def test_jobs_go_to_the_prepared_nodes_and_are_retried_on_node_death_only() -> None:
    options = job_options([A, B])
    assert options["label_selector"] == {"ray.io/node-id": f"in({A},{B})"}
    assert options["resources"] == {"planrun_sandbox": 1} and options["num_cpus"] == 0
    # A dead node or worker: run again. An exception (the job's own failure): never.
    assert options["max_retries"] == NODE_RETRIES >= 1
    assert options["retry_exceptions"] is False


def test_a_node_running_other_planrun_code_is_left_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no.sock'}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    same = NodeExpectation(__version__, EXPECTED.image, "batch-b", True, code=code_digest())
    assert not CheckNode(same).check(NodeReport("n", "h")).problems[:-1]  # Docker's only
    other = NodeExpectation(__version__, EXPECTED.image, "batch-b", True, code="0" * 64)
    problem = CheckNode(other).check(NodeReport("n", "h")).problems[0]
    assert problem == (
        f"planrun's code here ({code_digest()[:12]}) differs from the driver's (000000000000): "
        "install the same planrun on every node"
    )


def test_a_tag_that_is_not_planruns_own_must_name_the_drivers_very_image() -> None:
    own = NodeExpectation(__version__, EXPECTED.image, "b", True, image_id="sha256:aa")
    assert own.acceptable("sha256:bb")  # content-addressed: a node's own build will do
    configured = NodeExpectation(
        __version__, "org/sandbox:latest", "b", False, image_id="sha256:aa"
    )
    assert configured.acceptable("sha256:aa") and not configured.acceptable("sha256:bb")
    unknown = NodeExpectation(__version__, "org/sandbox:latest", "b", False)
    assert unknown.acceptable("sha256:bb")  # the driver has none to compare with


class NoImages:
    """A Docker client whose engine never has the image (outermost edge)."""

    class images:
        @staticmethod
        def get(tag: str) -> Any:
            raise docker.errors.ImageNotFound(tag)


def test_a_build_that_leaves_the_tag_missing_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    monkeypatch.setattr("sandbox_runner.sandbox.docker_engine.connect", lambda timeout: NoImages())
    monkeypatch.setattr("sandbox_runner.sandbox.image.build", built.append)
    report = ProvideImage(EXPECTED).provide(NodeReport("n", "host-n"))
    assert len(built) == 1
    assert report.problems == (
        f"no sandbox image: {EXPECTED.image} is still missing after providing it",
    )


def test_the_code_digest_is_the_same_from_a_wheel_and_an_editable_install(
    tmp_path: Path,
) -> None:
    def install(root: Path, images: Path) -> dict[str, Path]:
        (root / "agents" / "prompts").mkdir(parents=True)
        (root / "agents" / "prompts" / "plan.md").write_text("Plan carefully.\n")
        (root / "__init__.py").write_text("")
        images.mkdir(parents=True, exist_ok=True)
        (images / "__init__.py").write_text("")
        (images / "Dockerfile").write_text("FROM debian\n")
        return {"": root, "images/": images}

    wheel = install(tmp_path / "site" / "sandbox_runner", tmp_path / "site/sandbox_runner/images")
    editable = install(tmp_path / "checkout" / "sandbox_runner", tmp_path / "checkout" / "images")
    (tmp_path / "checkout/sandbox_runner/__pycache__").mkdir()
    (tmp_path / "checkout/sandbox_runner/__pycache__/x.cpython-312.pyc").write_bytes(b"built")
    assert tree_digest(wheel) == tree_digest(editable)
    (tmp_path / "site/sandbox_runner/agents/prompts/plan.md").write_text("Plan carelessly.\n")
    assert tree_digest(wheel) != tree_digest(editable)  # other prompts write other plans
