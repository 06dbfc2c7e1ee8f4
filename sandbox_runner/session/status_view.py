"""What /status, /memory and /cost print, line mode and terminal alike."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox_runner.paths import claude_home, planrun_home
from sandbox_runner.safe_text import one_line
from sandbox_runner.session.session import Session


def status_lines(session: Session) -> list[str]:
    """`key: value` lines: what /status prints, line mode and terminal alike."""
    state, files = session.state, session.memory.files
    tokens, cost = session.totals()
    return [
        f"session: {state.active_id}",
        f"mode: {state.mode}",
        f"previous_mode: {state.previous_mode}",
        f"plan_file: {state.plan_file or '-'}",
        f"repository: {state.repo}",
        f"model: {state.model}",
        f"tokens: {tokens}",
        f"cost_usd: {cost:.4f}",
        f"memory: {', '.join(_shown(session, f.path) for f in files) or '-'}",
    ]


def memory_lines(session: Session) -> list[str]:
    """What /memory prints: each memory file with its size and path, and how to edit one."""
    memory = session.memory
    if not memory.files and not memory.nested:
        lines = [
            "no memory files; planrun reads CLAUDE.md, AGENTS.md, .planrun/PLANRUN.md and "
            f"CLAUDE.local.md in the repository, and {claude_home() / 'CLAUDE.md'} and "
            f"{planrun_home() / 'PLANRUN.md'}"
        ]
    else:
        lines = ["memory files in use (read when the session started):"]
    for file in memory.files:
        how = f"{file.scope}, imported by {file.imported_by}" if file.imported_by else file.scope
        cut = f"; {file.note}" if file.note else ""
        lines.append(f"  {_size(file.size):>8}  {one_line(file.path)}  ({how}{cut})")
    for nested in memory.nested:
        lines.append(f"  {'on use':>8}  {one_line(session.workspace / nested)}  (nested)")
    lines += [f"  not read: {one_line(problem)}" for problem in memory.problems]
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "your editor"
    lines.append(
        f"to edit one: open it in {one_line(editor)}, or ask the agent (an edit you approve); "
        "a new session (--continue) reads the changes"
    )
    return lines


def _shown(session: Session, path: Path) -> str:
    try:
        return one_line(path.relative_to(session.workspace))
    except ValueError:
        return one_line(path)


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


def cost_lines(session: Session) -> list[str]:
    """What /cost prints: each conversation's tokens and cost so far, then the total (the
    toolbar's numbers)."""
    state, lines = session.state, []
    for which, loop in session.tally.loops().items():
        # The work and plan conversations, then each Task subagent ("work/task-1-Explore").
        usage = loop.state.usage
        name = state.id + ("-plan" if which == "plan" else "" if which == "work" else f" {which}")
        cost = session.ledger.cost(which, usage, state.model)
        lines.append(
            f"{name}: {usage.input_tokens:,} input, {usage.output_tokens:,} output, "
            f"{usage.cache_read_input_tokens:,} cache read, "
            f"{usage.cache_creation_input_tokens:,} cache write tokens; ${cost:.4f}"
        )
    tally = session.tally
    if tally.earlier_tokens:
        before = f"{tally.earlier_tokens:,} tokens; ${tally.earlier_cost:.4f}"
        lines.append(f"before this resume: {before}")
    tokens, cost = session.totals()
    lines.append(f"total: {tokens:,} tokens; ${cost:.4f} (estimated at list price)")
    if (spend := session.limits.spend) is not None and spend.max_usd is not None:
        left = spend.left() or 0.0
        lines.append(f"budget: ${spend.spent:.4f} of ${spend.max_usd:.4f} used, ${left:.4f} left")
    return lines
