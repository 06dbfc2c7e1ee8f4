"""The work agent's checklist: its items, the TodoWrite tool that replaces them (answered
on the host: it only changes the session's state), and the checklist an accepted plan's
Detailed Steps start it with."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from sandbox_runner.agents.cancel import Cancel
from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.safe_text import one_line
from sandbox_runner.tools.schemas import TODO_STATUSES
from sandbox_runner.types import ToolCall, ToolResult

MAX_TODOS = 50
"""Items a checklist may hold: a longer list is refused, and the model asked to merge steps."""
MAX_TODO_CHARS = 300
"""Characters of one item's content (or activeForm): a step, not a paragraph."""
TODOS_EVENT = "todos_updated"
"""The AgentEvent kind a UI gets when the checklist changed (detail: the new checklist
as text, one item a line)."""
PENDING, IN_PROGRESS, COMPLETED = TODO_STATUSES
MARKS = {PENDING: "[ ]", IN_PROGRESS: "[~]", COMPLETED: "[x]"}
"""Each status as plain text shows it (line mode, /todos, what the agent is told)."""
_MARKUP = re.compile(r"\*\*|__|`|^\[[ xX~]\]\s*")


@dataclass(frozen=True)
class Todo:
    """One item of the checklist, in Claude Code's TodoWrite shape."""

    content: str
    status: str = PENDING
    """pending, in_progress or completed."""
    active_form: str = ""
    """The item as under way ("Running the tests"); shown while it is in progress."""

    @property
    def label(self) -> str:
        """What the user sees for the item: its active form while under way."""
        return self.active_form if self.status == IN_PROGRESS and self.active_form else self.content

    def to_saved(self) -> dict[str, str]:
        saved = asdict(self)
        saved["activeForm"] = saved.pop("active_form")
        return saved


class TodoProblem(ValueError):
    """Why a TodoWrite call was refused: one line for the model."""


def parse_todos(raw: object) -> tuple[list[Todo], list[str]]:
    """The checklist a TodoWrite input (or a saved state) holds, and the warnings about it.

    Raises:
        TodoProblem: not a list of items, too many, an item too long or with no content.
    """
    if not isinstance(raw, list):
        raise TodoProblem("todos must be an array of {content, status, activeForm} items")
    if len(raw) > MAX_TODOS:
        raise TodoProblem(
            f"the checklist has {len(raw)} items; at most {MAX_TODOS}: merge small steps"
        )
    todos = [_item(index, entry) for index, entry in enumerate(raw)]
    warnings = []
    under_way = [todo for todo in todos if todo.status == IN_PROGRESS]
    if len(under_way) > 1:
        warnings.append(
            f"{len(under_way)} items are in_progress; keep exactly one in_progress at a time "
            "(finish it, mark it completed, then start the next)"
        )
    return todos, warnings


def _item(index: int, entry: object) -> Todo:
    if not isinstance(entry, dict):
        raise TodoProblem(f"todos[{index}] must be an object with content and status")
    content = _text(index, "content", entry.get("content"))
    if not content:
        raise TodoProblem(f"todos[{index}].content is empty")
    status = entry.get("status", PENDING)
    if status not in TODO_STATUSES:
        raise TodoProblem(f"todos[{index}].status must be one of: {', '.join(TODO_STATUSES)}")
    active = entry.get("activeForm", entry.get("active_form"))
    return Todo(content, str(status), _text(index, "activeForm", active) if active else "")


def _text(index: int, key: str, value: object) -> str:
    if not isinstance(value, str):
        raise TodoProblem(f"todos[{index}].{key} must be a string")
    text = one_line(" ".join(value.split()))
    if len(text) > MAX_TODO_CHARS:
        raise TodoProblem(
            f"todos[{index}].{key} has {len(text)} characters; at most {MAX_TODO_CHARS}: "
            "one short line per step"
        )
    return text


def saved_todos(raw: object) -> list[dict[str, str]]:
    """A saved checklist as it may be kept: a damaged one (edited by hand, say) is dropped."""
    try:
        return [todo.to_saved() for todo in parse_todos(raw)[0]]
    except TodoProblem:
        return []


def load_todos(saved: list[dict[str, str]]) -> list[Todo]:
    """The checklist of a session's state."""
    try:
        return parse_todos(saved)[0]
    except TodoProblem:
        return []


def plain_lines(todos: list[Todo]) -> list[str]:
    """The checklist in plain text, one item a line: `[x] Add the flag`."""
    return [f"{MARKS[todo.status]} {todo.content}" for todo in todos]


def summary(todos: list[Todo]) -> str:
    """`2 of 5 done` and the item under way."""
    done = sum(1 for todo in todos if todo.status == COMPLETED)
    now = next((todo.content for todo in todos if todo.status == IN_PROGRESS), "")
    return f"{done} of {len(todos)} done" + (f"; in progress: {now}" if now else "")


class TodoWriteTool:
    """TodoWrite for the work session: hands the new checklist to SET_TODOS (which keeps it
    in the session's state) and tells the UI through ON_EVENT; nothing runs in a sandbox,
    nothing is asked."""

    def __init__(
        self,
        set_todos: Callable[[list[Todo]], None],
        on_event: Callable[[AgentEvent], None],
        label: str,
    ) -> None:
        self.set_todos, self.on_event, self.label = set_todos, on_event, label

    def __call__(self, call: ToolCall, stop: Cancel) -> ToolResult:
        try:
            todos, warnings = parse_todos(call.input.get("todos"))
        except TodoProblem as problem:
            return ToolResult(call.id, f"The checklist was not changed: {problem}.", True)
        self.set_todos(todos)
        detail = "\n".join(plain_lines(todos))
        self.on_event(AgentEvent(TODOS_EVENT, self.label, 0, "TodoWrite", detail, 0, 0, 0.0))
        text = f"Checklist updated ({summary(todos)})." if todos else "Checklist cleared."
        text += " Keep it current: mark each step completed as soon as it is done."
        return ToolResult(call.id, " ".join([text, *(f"Warning: {w}." for w in warnings)]))


def plan_steps(plan_text: str) -> list[Todo]:
    """The checklist an accepted plan starts the work with: its Detailed Steps section's
    subheadings, else its top-level items (list items, table rows or paragraphs), each on
    one line; none when the plan has no such section."""
    from sandbox_runner.plans.text import HEADING, fenced_lines, heading_text, section_points
    from sandbox_runner.plans.validate import extract_section

    section = extract_section(plan_text, "Detailed Steps")
    if not section:
        return []
    lines = section.splitlines()
    fenced = fenced_lines(lines)
    headings = [
        heading_text(line[match.end() :])
        for line, in_fence in zip(lines, fenced, strict=True)
        if not in_fence and (match := HEADING.match(line))
    ]
    steps = headings or section_points(section)
    todos = []
    for step in steps[:MAX_TODOS]:
        text = " ".join(_MARKUP.sub("", one_line(step)).split())
        if text:
            todos.append(Todo(_shorten(text)))
    return todos


def _shorten(text: str) -> str:
    if len(text) <= MAX_TODO_CHARS:
        return text
    return text[: MAX_TODO_CHARS - 1].rsplit(" ", 1)[0] + "…"


def todo_lines(saved: list[dict[str, str]]) -> list[str]:
    """What /todos prints: the whole checklist, numbered, under how far along it is."""
    todos = load_todos(saved)
    if not todos:
        return [
            "no checklist: the work agent keeps one with TodoWrite (an accepted plan's "
            "Detailed Steps start it)"
        ]
    lines = plain_lines(todos)
    return [f"checklist: {summary(todos)}"] + [f"  {n}. {line}" for n, line in enumerate(lines, 1)]
