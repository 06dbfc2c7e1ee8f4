"""Answers that stream, for real: `planrun` in tmux (and in line mode) against the fake
Messages API, which sends each answer a word at a time. The screen shows an answer before
it ends, then as Markdown; Ctrl-C stops a stream at once and gives back a queued line; a
failed tool call says why; the spinner and the toolbar count the same tokens."""

from __future__ import annotations

import os
import re
import select
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_session_line import owned_repo
from tests.e2e.test_session_line import planrun as planrun_lines
from tests.e2e.test_session_terminal import PROMPT, planrun
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use

WORDS = " ".join(f"w{n}" for n in range(30))
ANSWER = f"Streaming **words** arrive {WORDS} THE-END."
SLOW = 0.3
"""Seconds between two words of the slow answer: 10 s in all."""


def _last_user_text(body: dict[str, Any]) -> str:
    for block in reversed(body["messages"][-1]["content"]):
        if block.get("type") == "text":
            return str(block["text"])
    return ""


def script(body: dict[str, Any]) -> Any:
    """Answers a word at a time; reads a missing file when asked to; slowly when asked to."""
    if any(block.get("type") == "tool_result" for block in body["messages"][-1]["content"]):
        return message(text("That file is not there."), pace=0.01)
    user = _last_user_text(body)
    if "missing" in user:
        return message(text("Let me read it."), tool_use("Read", {"file_path": "src/gone.py"}))
    if "slowly" in user:
        return message(text(ANSWER), pace=SLOW)
    return message(text(ANSWER), pace=0.05)


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(script) as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return owned_repo(tmp_path / "repo")


def test_an_answer_appears_before_it_ends_then_reads_as_markdown(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("please answer slowly")
        term.keys("Enter")
        early = term.wait_for(r"Streaming \*\*words\*\* arrive w0")
        assert "THE-END" not in early  # it is on the screen while the stream goes on
        later = term.wait_for(r"arrive w0 w1 w2 w3")
        assert "THE-END" not in later
        # One count: the spinner's and the toolbar's are the same number.
        spinner = re.search(r"· ([\d,]+) tokens · esc to interrupt", later)
        facts = re.search(r"· ([\d,]+) tokens · \$", later)
        assert spinner and facts and spinner.group(1) == facts.group(1), later
        done = term.wait_for(r"w29 THE-END\.", timeout=30)
        term.wait_gone(r"\*\*words\*\*")  # printed again as Markdown: bold, no asterisks
        assert "Streaming words arrive w0" in term.screen() and "THE-END" in done
        term.keys("C-d")
        term.wait_exit()


def test_ctrl_c_stops_a_stream_at_once_and_a_queued_line_comes_back(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("please answer slowly")
        term.keys("Enter")
        term.wait_for(r"arrive w0")
        term.type("and then briefly")
        term.keys("Enter")
        term.wait_for(r"\(queued: it runs when")
        pressed = time.monotonic()
        term.keys("C-c")
        screen = term.wait_for("stopped: interrupted", timeout=10)
        assert time.monotonic() - pressed < 2.0
        assert "THE-END" not in screen
        screen = term.wait_for(r"queued message is back in the input")
        assert re.search(r"(?m)^› and then briefly", screen), screen
        term.keys("Enter")  # sends it: the answer streams as usual
        term.wait_for(r"w29 THE-END\.", timeout=30)
        term.keys("C-d")
        term.wait_exit()
    interrupted = api.message_requests[0]
    then = api.message_requests[-1].body["messages"][-1]["content"]
    assert interrupted.body["stream"] is True
    assert [block["text"] for block in then] == [
        "please answer slowly",
        "[The user interrupted this turn before it finished.]",
        "and then briefly",
    ]


def test_esc_stops_a_stream_in_well_under_a_second(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    """Esc took one to two seconds: prompt_toolkit waited to see whether Enter or M
    followed it."""
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("please answer slowly")
        term.keys("Enter")
        term.wait_for(r"arrive w0")
        pressed = time.monotonic()
        term.keys("Escape")
        screen = term.wait_for("stopped: interrupted", timeout=10)
        assert time.monotonic() - pressed < 0.8
        assert "THE-END" not in screen
        term.keys("C-d")
        term.wait_exit()


def test_a_failed_tool_call_says_why_in_the_terminal(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    with planrun(api, repo, planrun_home) as term:
        term.wait_for(PROMPT)
        term.type("read the missing file")
        term.keys("Enter")
        screen = term.wait_for(r"That file is not there\.")
        assert re.search(r"● Read src/gone\.py ✗ .*(not exist|No such file)", screen), screen
        assert screen.index("Let me read it.") < screen.index("● Read src/gone.py")
        term.keys("C-d")
        term.wait_exit()


def read_available(fd: int, until: str, seconds: float = 60) -> str:
    """What arrives on FD until UNTIL is in it (the bytes as they come, no line buffering)."""
    seen = b""
    deadline = time.monotonic() + seconds
    while until.encode() not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"the output ended before {until!r}: {seen!r}"
            seen += chunk
    return seen.decode(errors="replace")


def test_line_mode_prints_an_answer_as_it_arrives_and_tool_failures_with_their_reason(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    process = planrun_lines(api, "--repo", str(repo), home=planrun_home)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write("please answer slowly\nread the missing file\n")
        process.stdin.flush()
        fd = process.stdout.fileno()
        early = read_available(fd, "arrive w0")
        assert "THE-END" not in early  # the line is half written: the rest is on its way
        rest = read_available(fd, "That file is not there.")
        out, err = process.communicate("", 60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    printed = early + rest + out
    assert f"{ANSWER}\n" in printed
    assert re.search(r"(?m)^· Read src/gone\.py\n  ✗ .*(not exist|No such file)", printed), printed
