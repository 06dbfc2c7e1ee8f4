"""Git for tests: run in a repository with no user or system config and a fixed author."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str) -> str:
    """Run git in REPO; its output, stripped (a failure raises)."""
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()
