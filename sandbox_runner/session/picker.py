"""`planrun --resume` without an id: the repository's sessions to choose from, with the
arrow keys on a terminal, as a list elsewhere."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path

from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_text import one_line
from sandbox_runner.session.state import SessionState, all_sessions


def session_line(state: SessionState) -> str:
    """One session in one line: id, mode, last activity, tokens and cost, plan file."""
    when = datetime.datetime.fromtimestamp(state.last_activity).strftime("%Y-%m-%d %H:%M")
    line = f"{state.id:<24} {state.mode:<12} {when}  {state.tokens:>8} tok  ${state.cost_usd:.2f}"
    return one_line(f"{line}  {state.plan_file or '-'}")


def pick_session(workspace: Path, choose: Callable[[list[SessionState]], str | None] | None) -> str:
    """The id of the session of WORKSPACE to resume: CHOOSE picks it (a terminal's list),
    or, without a terminal, the list is printed and the user is told how to pick one.

    Raises:
        ConfigError: no session of WORKSPACE, none chosen, or no terminal to choose on.
    """
    found = [state for state in all_sessions() if state.repo == str(workspace)]
    if not found:
        raise ConfigError(f"no session of {workspace} to resume; start one with `planrun`")
    if choose is None:
        for state in found:
            print(session_line(state))
        raise ConfigError("choose a session: planrun --resume ID")
    chosen = choose(found)
    if chosen is None:
        raise ConfigError("no session chosen; planrun --resume ID resumes one")
    return chosen


def resume_target(current: SessionState, wanted: str) -> tuple[str | None, list[str]]:
    """`/resume [ID]` in a session: without WANTED, the repository's other sessions to
    switch to; with it (an id or the start of one), that session's id and what to say.

    Raises:
        ConfigError: WANTED names no other session of the repository, or several.
    """
    others = [s for s in all_sessions() if s.repo == current.repo and s.id != current.id]
    if not wanted:
        if not others:
            return None, ["no other session of this repository (planrun starts a new one)"]
        lines = ["the other sessions of this repository, the most recent first:"]
        lines += [session_line(state) for state in others]
        return None, [*lines, "/resume ID switches to one; this session is kept"]
    matches = [s.id for s in others if s.id == wanted] or [
        s.id for s in others if s.id.startswith(wanted)
    ]
    if len(matches) != 1:
        what = "several sessions" if matches else "no other session"
        raise ConfigError(f"{what} of this repository match {wanted!r}; /resume lists them")
    return matches[0], [f"switching to session {matches[0]}"]


def choose_on_terminal(found: list[SessionState]) -> str | None:
    """The session chosen with the arrow keys and Enter (None: Ctrl-C or Ctrl-D)."""
    from prompt_toolkit.shortcuts import choice

    try:
        return choice(
            message="Resume which session? (the most recent first)",
            options=[(state.id, session_line(state)) for state in found],
            default=found[0].id,
        )
    except (KeyboardInterrupt, EOFError):
        return None
