"""The tool server runs standalone (standard library only), so it keeps copies of a few
host-side constants; each copy must equal the definition the host uses."""

from __future__ import annotations

import pytest

from sandbox_runner.limits import MAX_TOOL_TIMEOUT_SECONDS, TOOL_TIMEOUT_SECONDS, Limits
from sandbox_runner.sandbox.client import MAX_TEXT_CHARS
from sandbox_runner.sandbox.toolserver import protocol, server
from sandbox_runner.sandbox.toolserver.ops import bash, glob, grep, ls, read
from sandbox_runner.tools import schemas
from sandbox_runner.tools.output import MAX_RESULT_CHARS


@pytest.mark.parametrize(
    ("copy", "definition"),
    [
        (protocol.DEFAULT_TIMEOUT, TOOL_TIMEOUT_SECONDS),
        (protocol.MAX_TIMEOUT, MAX_TOOL_TIMEOUT_SECONDS),
        (server.DEFAULT_MAX_PLAN_BYTES, Limits().plan_dir_mb * 1024 * 1024),
        (server.DEFAULT_MAX_PLAN_ENTRIES, Limits().plan_dir_entries),
        (read.READ_DEFAULT_LIMIT, schemas.READ_DEFAULT_LINES),
        (read.READ_MAX_LINE_CHARS, schemas.READ_MAX_LINE_CHARS),
        (glob.GLOB_MAX_RESULTS, schemas.GLOB_MAX_RESULTS),
        (ls.LS_MAX_ENTRIES, schemas.LS_MAX_ENTRIES),
        (grep.GREP_MAX_LINES, schemas.GREP_MAX_LINES),
        (bash.BASH_STREAM_LIMIT, MAX_RESULT_CHARS),
    ],
    ids=[
        "DEFAULT_TIMEOUT",
        "MAX_TIMEOUT",
        "DEFAULT_MAX_PLAN_BYTES",
        "DEFAULT_MAX_PLAN_ENTRIES",
        "READ_DEFAULT_LIMIT",
        "READ_MAX_LINE_CHARS",
        "GLOB_MAX_RESULTS",
        "LS_MAX_ENTRIES",
        "GREP_MAX_LINES",
        "BASH_STREAM_LIMIT",
    ],
)
def test_the_tool_servers_copy_equals_the_host_definition(copy: float, definition: float) -> None:
    assert copy == definition


def test_the_host_accepts_the_largest_output_the_tool_server_sends() -> None:
    assert protocol.MAX_OUTPUT_BYTES <= MAX_TEXT_CHARS
