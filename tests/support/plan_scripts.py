"""Scripts for the fake Messages API when several Plan subagents share it at once.

Requests from parallel subagents arrive in any order, so the answer is chosen by the
plan file named in the system prompt (`/plan/<label>.md`) and by the turn number.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.support.fake_messages_api import Scripted, error, message, text, tool_use

PLAN_FILE = re.compile(r"/plan/([A-Za-z0-9_.-]+)\.md")


def label_of(body: dict[str, Any]) -> str:
    system = body.get("system")
    prompt = (
        " ".join(b.get("text", "") for b in system) if isinstance(system, list) else str(system)
    )
    match = PLAN_FILE.search(prompt)
    return match.group(1) if match else "?"


def turn_of(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def writes_plan(label: str, plan: str) -> list[Scripted]:
    """A short, well-behaved conversation: look around, write the plan, stop."""
    return [
        message(tool_use("Glob", {"pattern": "**/*.py"})),
        message(tool_use("Write", {"file_path": f"/plan/{label}.md", "content": plan})),
        message(text(f"The plan is in /plan/{label}.md.")),
    ]


# A scripted answer, or a function that makes one when the request arrives.
Answer = Scripted | Callable[[], Scripted]


class PerspectiveScript:
    """Answers each subagent from its own list; unknown labels get an API error."""

    def __init__(
        self,
        conversations: Mapping[str, Sequence[Answer]],
        *,
        delays: dict[str, float] | None = None,
    ) -> None:
        self.conversations = conversations
        self.delays = delays or {}
        self.seen: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Scripted:
        label, turn = label_of(body), turn_of(body)
        self.seen.append(label)
        time.sleep(self.delays.get(label, 0.0))
        script = self.conversations.get(label)
        if script is None:
            return error(400, "invalid_request_error", f"no script for {label}")
        if turn >= len(script):
            return message(text("I have nothing to add."))
        answer = script[turn]
        return answer() if callable(answer) else answer
