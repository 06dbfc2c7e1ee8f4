"""A line-mode session on the user's own Node image (no python in it): the work agent runs
`node --test`, sees the failure as an error with its exit code, fixes the code, and the
tests pass, all in the sandbox derived from that image."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.e2e.test_session_line import planrun, read_until
from tests.support import toolchain_images
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use

SUM_TEST = """const test = require('node:test');
const assert = require('node:assert');
const sum = require('./sum');
test('adds', () => assert.strictEqual(sum(2, 3), 5));
"""


def script(body: dict[str, Any]) -> Any:
    turn = sum(1 for entry in body["messages"] if entry["role"] == "assistant")
    steps = [
        message(tool_use("Bash", {"command": "node --test"})),
        message(
            tool_use(
                "Edit",
                {"file_path": "sum.js", "old_string": "a - b", "new_string": "a + b"},
            )
        ),
        message(tool_use("Bash", {"command": "node --test"})),
        message(text("Fixed: sum adds.")),
    ]
    return steps[min(turn, len(steps) - 1)]


def node_repo(root: Path) -> Path:
    root.mkdir()
    (root / "sum.js").write_text("module.exports = (a, b) => a - b;\n")
    (root / "sum.test.js").write_text(SUM_TEST)
    if os.geteuid() == 0:  # the work container never runs as root
        for path in [root, *root.iterdir()]:
            os.chown(path, 4321, 4321)
    return root


def tool_results(api: FakeMessagesAPI) -> list[dict[str, Any]]:
    last = api.message_requests[-1].body["messages"]
    return [
        block
        for entry in last
        if entry["role"] == "user" and isinstance(entry["content"], list)
        for block in entry["content"]
        if block.get("type") == "tool_result"
    ]


def test_the_work_agent_runs_node_tests_on_the_user_s_image(
    tmp_path: Path, planrun_home: Path, docker_client: Any
) -> None:
    node = toolchain_images.node_image(docker_client)
    repo = node_repo(tmp_path / "repo")
    with FakeMessagesAPI(script) as api:
        process = planrun(
            api, "--repo", str(repo), "--mode", "acceptEdits", "--image", node, home=planrun_home
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("make the tests pass\n")
        process.stdin.flush()
        seen = read_until(process.stdout, "approve?", seconds=600)
        out, err = process.communicate("a\n", 300)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert "node --test" in seen
    failed, edited, passed = tool_results(api)
    assert failed["is_error"] is True
    assert "Exit code 1" in str(failed["content"]) and "not ok" in str(failed["content"])
    assert not edited.get("is_error")
    assert not passed.get("is_error") and "# fail 0" in str(passed["content"])
    assert (repo / "sum.js").read_text() == "module.exports = (a, b) => a + b;\n"
    assert "Fixed: sum adds." in out
