"""Shared fixtures: isolated user state, and real Docker for the tests that prove enforcement."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--live",
        action="store_true",
        help="also run the tests marked live, against the real Anthropic API (costs money)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The live tests call the real API, so they run only when asked for with --live
    (`make test-live`); `make test` and CI never start them, key or no key."""
    if config.getoption("--live"):
        return
    live = [item for item in items if item.get_closest_marker("live")]
    if live:
        config.hook.pytest_deselected(items=live)
        items[:] = [item for item in items if not item.get_closest_marker("live")]


@pytest.fixture(autouse=True)
def planrun_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own ~/.planrun, so no test reads or writes the user's."""
    home = tmp_path_factory.mktemp("planrun-home")
    monkeypatch.setenv("PLANRUN_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def no_real_api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the live tests, a planrun that asks the API before a fake one is set up is
    refused at once (a local port nothing listens on), never sent to the real API."""
    if not request.node.get_closest_marker("live") and not os.environ.get("ANTHROPIC_BASE_URL"):
        monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")


@pytest.fixture(autouse=True)
def claude_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own ~/.claude, so no test reads the user's Claude Code agents."""
    home = tmp_path_factory.mktemp("claude-home")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home


def unavailable(reason: str) -> None:
    """Skip a Docker test locally; in CI a Docker test must never silently not run."""
    if IN_CI:
        pytest.fail(f"Docker test cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


SAMPLE_FILES = {
    "README.md": "# demo app\n",
    "src/app.py": "def main():\n    return 42\n",
    "src/util.py": "def log(msg):\n    print(msg)\n",
    "tests/test_app.py": "def test_main():\n    assert True\n",
}


def make_sample_repo(root: Path) -> Path:
    """A small repository: a README, two modules and a test."""
    for relative, content in SAMPLE_FILES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content)
    return root


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    """A fresh sample repository for one test."""
    return make_sample_repo(tmp_path / "repo")


@pytest.fixture(scope="session")
def docker_client() -> Any:
    from sandbox_runner.errors import PlanrunError
    from sandbox_runner.sandbox.docker_engine import connect

    try:
        return connect()
    except PlanrunError as error:
        unavailable(str(error))


@pytest.fixture(scope="session")
def sandbox_image(docker_client: Any) -> str:
    from sandbox_runner.errors import ImageMissingError
    from sandbox_runner.sandbox.image import require_image

    try:
        return require_image(docker_client)
    except ImageMissingError as error:
        unavailable(str(error))
        raise


@pytest.fixture
def test_session(docker_client: Any) -> Iterator[str]:
    """A session label for this test's containers; the test fails if any is left behind."""
    session = f"test-{uuid.uuid4().hex[:10]}"
    yield session
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"io.planrun.session={session}"}
    )
    for container in leftovers:
        container.remove(force=True)
    assert not leftovers, f"containers left behind: {[c.short_id for c in leftovers]}"
