"""Real runs against the Anthropic API: `planrun plan` with two perspectives and their
synthesis on examples/demo-repo, and a line-mode session with one tool round trip.

About $0.35 a run with claude-sonnet-4-6 (docs/development.md says how that is reckoned);
each test prints what its run cost, from the report's token counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.live

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODEL = os.environ.get("PLANRUN_LIVE_MODEL", "claude-sonnet-4-6")


def planrun(*args: str, stdin: str = "", home: Path) -> subprocess.CompletedProcess[str]:
    """A real `planrun` process with the caller's key, planrun's state under HOME."""
    return subprocess.run(
        [sys.executable, "-m", "sandbox_runner", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(os.environ, PLANRUN_HOME=str(home)),
        timeout=1800,
    )


def test_two_perspectives_and_their_synthesis_on_the_demo_repo(
    demo_repo: Path, tmp_path: Path, planrun_home: Path
) -> None:
    out = tmp_path / "out"
    run = planrun(
        "plan",
        "-f",
        str(EXAMPLES / "demo-requirements.md"),
        "--repo",
        str(demo_repo),
        "--perspective",
        "simplicity",
        "--perspective",
        "performance",
        "--model",
        MODEL,
        # A bound on the cost: a plan of the demo takes far fewer calls.
        "--max-turns",
        "25",
        "--out",
        str(out),
        "--json",
        home=planrun_home,
    )
    assert "Traceback" not in run.stderr, run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    print(f"cost of the plan run: ${report['totals']['cost_usd']}")
    assert run.returncode == 0, run.stderr
    assert report["status"] == "ok"
    plans = report["plans"]
    assert [plan["perspective"] for plan in plans] == ["simplicity", "performance"]
    assert all(plan["valid"] for plan in plans), [plan.get("problems") for plan in plans]
    recommended = report["recommended"]
    assert recommended is not None and recommended["valid"]
    assert recommended["sources"] and set(recommended["sources"]) <= {"simplicity", "performance"}
    # Each plan, the recommended one too, is about the requirement: due dates.
    for name in ("simplicity", "performance", "recommended"):
        assert "due" in (out / f"{name}.md").read_text().lower(), name


def test_a_line_mode_session_with_one_tool_round_trip(demo_repo: Path, planrun_home: Path) -> None:
    first_line = (demo_repo / "README.md").read_text().splitlines()[0]
    message = (
        "Use the Read tool once to read README.md, then answer with its first line "
        "exactly as it is written, and nothing else."
    )
    run = planrun(
        "--repo", str(demo_repo), "--model", MODEL, stdin=message + "\n", home=planrun_home
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stdout.splitlines()
    assert any(line.startswith("· Read") and "README.md" in line for line in lines), run.stdout
    assert first_line in lines, run.stdout
