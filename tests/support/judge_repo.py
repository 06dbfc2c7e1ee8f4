"""A small git repository with a plan of two steps, half carried out, and the verdict
files a judge writes about it: what the `verify --judge` tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.git_run import git

VERDICT_PATH = "/plan/verdicts.json"


def half_done_repo(root: Path) -> tuple[Path, Path]:
    """A repository whose change does step 1 of its plan (src/app.py) and only pretends
    to do step 2 (a comment in src/util.py: every file the plan names changed, so the
    checks pass even with --strict), and the plan, outside it: (repository, plan file)."""
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def main():\n    return 42\n")
    (repo / "src" / "util.py").write_text("def log(msg):\n    print(msg)\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    plan = root / "plan.md"
    plan.write_text(
        f"---\nbase_commit: {git(repo, 'rev-parse', 'HEAD')}\n---\n# Verbose\n\n"
        "## Detailed Steps\n1. Add a `verbose` argument to main in src/app.py.\n"
        "2. Log each step with src/util.py.\n\n"
        "## Critical Files for Implementation\n- src/app.py - main\n- src/util.py - log\n"
    )
    (repo / "src" / "app.py").write_text("def main(verbose=False):\n    return 42\n")
    (repo / "src" / "util.py").write_text("# logs each step\ndef log(msg):\n    print(msg)\n")
    return repo, plan


def verdicts(*entries: tuple[int, str, str]) -> str:
    """A verdict file's JSON: (step, verdict, evidence) each."""
    steps: list[dict[str, Any]] = [
        {"step": step, "verdict": verdict, "evidence": evidence}
        for step, verdict, evidence in entries
    ]
    return json.dumps({"steps": steps})


HALF_DONE = verdicts(
    (1, "done", "src/app.py:1 adds the verbose argument"),
    (2, "not done", "src/util.py only gained a comment: nothing logs"),
)
ALL_DONE = verdicts(
    (1, "done", "src/app.py:1 adds the verbose argument"),
    (2, "partly", "src/util.py:2 prints, but main never calls it"),
)
