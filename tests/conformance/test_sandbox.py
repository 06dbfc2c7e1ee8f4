"""What every Sandbox does, whatever runs it: the lifecycle and the tool operations,
through the Sandbox protocol only."""

from __future__ import annotations

import pytest

from sandbox_runner import Sandbox
from sandbox_runner.errors import SandboxError
from sandbox_runner.types import ExecResult, ToolRequest
from tests.conformance.conftest import Sandboxes


def call(sandbox: Sandbox, op: str, **args: object) -> ExecResult:
    return sandbox.call(ToolRequest(op, dict(args), timeout=30))


def test_start_twice_keeps_one_working_sandbox(sandboxes: Sandboxes) -> None:
    sandbox = sandboxes.new()
    sandbox.start()
    sandbox.start()
    assert call(sandbox, "ping").output == "pong"
    sandbox.stop()
    # (With Docker, a second container would be left behind: the session check fails.)


def test_stop_before_start_and_stop_twice_are_fine(sandboxes: Sandboxes) -> None:
    never_started = sandboxes.new()
    never_started.stop()
    sandbox = sandboxes.new()
    sandbox.start()
    sandbox.stop()
    sandbox.stop()
    with pytest.raises(SandboxError, match="not running"):
        call(sandbox, "ping")


def test_a_sandbox_that_was_never_started_refuses_calls(sandboxes: Sandboxes) -> None:
    with pytest.raises(SandboxError, match="not running"):
        call(sandboxes.new(), "ping")


def test_the_context_manager_stops_the_sandbox_on_an_exception(sandboxes: Sandboxes) -> None:
    with pytest.raises(RuntimeError, match="boom"), sandboxes.new() as sandbox:
        assert call(sandbox, "ping").ok
        raise RuntimeError("boom")
    with pytest.raises(SandboxError, match="not running"):
        call(sandbox, "ping")


def test_read_ls_and_glob_see_the_workspace(sandboxes: Sandboxes) -> None:
    """(Grep and LSP need ripgrep and ctags, which only the sandbox image has: they are
    tested there, in tests/docker/toolserver/.)"""
    with sandboxes.new() as sandbox:
        read = call(sandbox, "read", file_path="/workspace/src/app.py")
        listing = call(sandbox, "ls", path="/workspace")
        found = call(sandbox, "glob", pattern="**/*.py")
    assert read.ok and "def main():" in read.output and "return 42" in read.output
    assert read.output.lstrip().startswith("1")  # line-numbered
    assert listing.ok and "src/" in listing.output and "README.md" in listing.output
    assert found.ok
    assert set(found.output.split()) == {
        "/workspace/src/app.py",
        "/workspace/src/util.py",
        "/workspace/tests/test_app.py",
    }


def test_write_and_edit_reach_the_plan_directory_on_the_host(sandboxes: Sandboxes) -> None:
    with sandboxes.new() as sandbox:
        written = call(sandbox, "write", file_path="/plan/plan.md", content="# Plan\n\nstep one\n")
        assert written.ok, written.error
        assert (sandboxes.plan_dir / "plan.md").read_text() == "# Plan\n\nstep one\n"
        edited = call(
            sandbox, "edit", file_path="/plan/plan.md", old_string="one", new_string="two"
        )
        assert edited.ok, edited.error
        # On the host at once, not only when the sandbox stops.
        assert (sandboxes.plan_dir / "plan.md").read_text() == "# Plan\n\nstep two\n"
        read_back = call(sandbox, "read", file_path="/plan/plan.md")
    assert "step two" in read_back.output


def test_a_missing_file_is_an_error_result_naming_it(sandboxes: Sandboxes) -> None:
    with sandboxes.new() as sandbox:
        missing = call(sandbox, "read", file_path="/workspace/nope.txt")
        edit = call(sandbox, "edit", file_path="/plan/nope.md", old_string="a", new_string="b")
        still_there = call(sandbox, "ping")
    assert not missing.ok
    assert missing.error is not None and "/workspace/nope.txt" in missing.error
    assert "does not exist" in missing.error
    assert not edit.ok and edit.error is not None and "does not exist" in edit.error
    assert still_there.ok  # an error result, not a broken sandbox


def test_writes_outside_the_plan_directory_are_refused(sandboxes: Sandboxes) -> None:
    before = (sandboxes.workspace / "README.md").read_text()
    with sandboxes.new() as sandbox:
        result = call(sandbox, "write", file_path="/workspace/README.md", content="pwned\n")
    assert not result.ok
    assert result.error is not None and "only allowed in the plan directory" in result.error
    assert (sandboxes.workspace / "README.md").read_text() == before
