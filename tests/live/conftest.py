"""The live tier: real plan runs and a real session against the Anthropic API.

Each module is marked `live` (pytestmark), so the tests run only with `--live` (`make
test-live`), and are skipped when no key is set. They need Docker and the sandbox image,
as the end-to-end tests do."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


@pytest.fixture(autouse=True)
def api_key() -> None:
    """Skip, saying why, when there is no key to call the API with."""
    if not any(os.environ.get(name) for name in KEY_VARIABLES):
        pytest.skip("live tests call the real Anthropic API: set ANTHROPIC_API_KEY")


@pytest.fixture(autouse=True)
def needs_docker(api_key: None, sandbox_image: str) -> None:
    """Every live test runs real sandboxes (asked for only once a key is there)."""


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    """A copy of examples/demo-repo, so nothing a run does can touch the original."""
    source = Path(__file__).resolve().parents[2] / "examples" / "demo-repo"
    return Path(shutil.copytree(source, tmp_path / "demo-repo"))
