"""The tool server runs standalone (standard library only), so it keeps copies of a few
host-side constants; each copy must equal the definition the host uses."""

from __future__ import annotations

import pytest

from sandbox_runner.limits import MAX_TOOL_TIMEOUT_SECONDS, TOOL_TIMEOUT_SECONDS, Limits
from sandbox_runner.sandbox import toolserver
from sandbox_runner.sandbox.client import MAX_TEXT_CHARS
from sandbox_runner.tools import schemas
from sandbox_runner.tools.output import MAX_RESULT_CHARS


@pytest.mark.parametrize(
    ("copy", "definition"),
    [
        ("DEFAULT_TIMEOUT", TOOL_TIMEOUT_SECONDS),
        ("MAX_TIMEOUT", MAX_TOOL_TIMEOUT_SECONDS),
        ("DEFAULT_MAX_PLAN_BYTES", Limits().plan_dir_mb * 1024 * 1024),
        ("DEFAULT_MAX_PLAN_ENTRIES", Limits().plan_dir_entries),
        ("READ_DEFAULT_LIMIT", schemas.READ_DEFAULT_LINES),
        ("READ_MAX_LINE_CHARS", schemas.READ_MAX_LINE_CHARS),
        ("GLOB_MAX_RESULTS", schemas.GLOB_MAX_RESULTS),
        ("LS_MAX_ENTRIES", schemas.LS_MAX_ENTRIES),
        ("BASH_STREAM_LIMIT", MAX_RESULT_CHARS),
    ],
)
def test_the_tool_servers_copy_equals_the_host_definition(copy: str, definition: float) -> None:
    assert getattr(toolserver, copy) == definition


def test_the_host_accepts_the_largest_output_the_tool_server_sends() -> None:
    assert toolserver.MAX_OUTPUT_BYTES <= MAX_TEXT_CHARS
