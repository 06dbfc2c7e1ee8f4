"""A session comes back with the flags it was opened with: `planrun --continue` after
`planrun --image node-tools:18 --scratch --allow-web docs.example.com` runs on the same
toolchain, with the same grants, unless the resume gives flags of its own."""

from __future__ import annotations

from pathlib import Path

from sandbox_runner.mcp.launch import McpChoice
from sandbox_runner.session.interactive import SessionOptions, _with_flags_of_resumed
from sandbox_runner.session.remembered import flags_of, with_remembered
from sandbox_runner.session.state import SessionStore

OPENED = SessionOptions(
    image="node-tools:18",
    network=True,
    scratch=True,
    allow_web=("docs.example.com",),
    mcp=McpChoice(Path("/etc/mcp.json"), strict=True),
)


def test_the_flags_given_are_kept_and_come_back_where_a_resume_gives_none() -> None:
    flags = flags_of(OPENED)
    assert flags == {
        "image": "node-tools:18",
        "network": True,
        "scratch": True,
        "allow_web": ["docs.example.com"],
        "mcp_config": "/etc/mcp.json",
        "strict_mcp_config": True,
    }
    assert with_remembered(SessionOptions(continue_latest=True), flags) == SessionOptions(
        continue_latest=True,
        image="node-tools:18",
        network=True,
        scratch=True,
        allow_web=("docs.example.com",),
        mcp=McpChoice(Path("/etc/mcp.json"), strict=True),
    )
    assert flags_of(SessionOptions()) == {}


def test_a_flag_given_on_resume_wins_and_a_damaged_entry_is_ignored() -> None:
    given = SessionOptions(image="go-tools:1", network=False, allow_web=("pypi.org",))
    back = with_remembered(given, flags_of(OPENED))
    assert (back.image, back.network, back.allow_web) == ("go-tools:1", False, ("pypi.org",))
    damaged = {"image": 7, "network": "yes", "allow_web": "x", "scratch": "true", "mcp_config": 1}
    assert with_remembered(SessionOptions(), damaged) == SessionOptions()


def test_continue_reads_the_flags_of_the_latest_session(planrun_home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    store, state = SessionStore.create(repo, "claude-sonnet-4-6")
    state.flags = flags_of(OPENED)
    store.save(state)
    resumed = _with_flags_of_resumed(SessionOptions(continue_latest=True), repo)
    assert resumed.image == "node-tools:18" and resumed.scratch
    by_id = _with_flags_of_resumed(SessionOptions(resume_id=state.id), repo)
    assert by_id.allow_web == ("docs.example.com",)
    assert _with_flags_of_resumed(SessionOptions(), repo) == SessionOptions()  # a new one
    unknown = SessionOptions(resume_id="no-such-session")
    assert _with_flags_of_resumed(unknown, repo) == unknown  # opening it says why
