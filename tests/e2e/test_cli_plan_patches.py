"""A plan agent's refused edits are kept as proposed patches: in the plan's front matter,
in report.json and in report.md (real containers, the SDK against the fake API)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli
from sandbox_runner.plans.document import split_document
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.plan_scripts import PerspectiveScript
from tests.unit.test_plan_loop import VALID_PLAN


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """Every test here runs real sandboxes."""


EDIT = {"file_path": "/workspace/src/app.py", "old_string": "42", "new_string": "43"}


def test_a_refused_edit_becomes_a_proposed_patch(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript(
        {
            "plan": [
                message(tool_use("Edit", EDIT)),
                message(tool_use("Write", {"file_path": "src/new.py", "content": "x = 1\n"})),
                message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
                message(text("Done.")),
            ]
        }
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["plan", "x", "--repo", str(sample_repo), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    # Nothing was changed, and the model heard that the patch was kept.
    assert (sample_repo / "src/app.py").read_text() == "def main():\n    return 42\n"
    assert not (sample_repo / "src/new.py").exists()
    answer = api.message_requests[1].body["messages"][-1]["content"][0]
    assert answer["is_error"] and "recorded as a proposed patch" in json.dumps(answer)

    [entry] = json.loads(result.stdout)["plans"]
    edit, write = entry["proposed_patches"]
    assert (edit["file"], edit["tool"]) == ("src/app.py", "Edit")
    assert "-    return 42\n+    return 43\n" in edit["diff"]
    assert "--- a/src/app.py" in edit["diff"] and "only allowed on the plan file" in edit["reason"]
    assert write["file"] == "src/new.py" and "--- /dev/null" in write["diff"]

    metadata, _ = split_document((out / "plan.md").read_text())
    assert [p["file"] for p in metadata["proposed_patches"]] == ["src/app.py", "src/new.py"]
    report_md = (out / "report.md").read_text()
    assert "## Proposed patches" in report_md and "+    return 43" in report_md
    assert "Proposed patches" in (out / "report.html").read_text()
