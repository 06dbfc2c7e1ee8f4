"""The checklist as the terminal draws it above the prompt: a few lines, the item under
way highlighted, the rest collapsed into "+N more" (`/todos` prints it all)."""

from __future__ import annotations

from sandbox_runner.session.todos import COMPLETED, IN_PROGRESS, PENDING, Todo

GLYPHS = {PENDING: "☐", IN_PROGRESS: "◐", COMPLETED: "☑"}
STYLES = {PENDING: "class:todo", IN_PROGRESS: "class:todo.active", COMPLETED: "class:todo.done"}
SHOWN_ITEMS = 5
"""Items drawn above the prompt at most; a longer checklist is collapsed around the
item under way."""

Fragments = list[tuple[str, str]]
"""prompt_toolkit's formatted text: (style, text) pairs."""


def visible_window(todos: list[Todo], shown: int = SHOWN_ITEMS) -> tuple[int, int]:
    """The slice [start, end) of TODOS drawn: all of a short list, else SHOWN items from
    the one before the item under way (or the first not done)."""
    if len(todos) <= shown + 1:  # "+1 more" would take the line the item needs
        return 0, len(todos)
    focus = next((i for i, todo in enumerate(todos) if todo.status == IN_PROGRESS), None)
    if focus is None:
        focus = next((i for i, todo in enumerate(todos) if todo.status == PENDING), len(todos))
    start = max(0, min(focus - 1, len(todos) - shown))
    return start, start + shown


def compact_fragments(todos: list[Todo], width: int, *, busy: bool) -> Fragments:
    """The lines above the prompt (each ending in a line break), or none: no checklist,
    or every item done and the agent's turn over."""
    if not todos or (not busy and all(todo.status == COMPLETED for todo in todos)):
        return []
    start, end = visible_window(todos)
    limit = max(width - 4, 10)
    fragments: Fragments = []
    for todo in todos[start:end]:
        text = todo.label if len(todo.label) <= limit else todo.label[: limit - 1] + "…"
        fragments.append((STYLES[todo.status], f"  {GLYPHS[todo.status]} {text}\n"))
    hidden = todos[:start] + todos[end:]
    if hidden:
        done = sum(1 for todo in hidden if todo.status == COMPLETED)
        parts = [
            f"{done} done" if done else "",
            f"{len(hidden) - done} to do" if done < len(hidden) else "",
        ]
        counts = ", ".join(part for part in parts if part)
        fragments.append(("class:todo.more", f"  +{len(hidden)} more ({counts}) · /todos\n"))
    return fragments
