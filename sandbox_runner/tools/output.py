"""The size of what a tool gives the model: every result is capped, and says how to narrow it."""

from __future__ import annotations

MAX_RESULT_CHARS = 30_000
"""The most a tool result may put into the context, as Claude Code caps its tools' output."""

NARROWING_HINTS = {
    "Grep": (
        "narrow the search: a more specific pattern, a path, a glob or type filter, "
        'output_mode "files_with_matches" or "count", or a head_limit'
    ),
    "Glob": "narrow the pattern, or give a path below the workspace root",
    "Read": "read a smaller range with offset and limit",
    "LS": "list a deeper path, or pass ignore patterns",
    "Bash": "narrow the command (a more specific path or pattern, or `| head -n 100`)",
    "LSP": "ask about a more specific symbol or file",
    "WebFetch": "fetch a more specific page (a section's own URL), or search for one",
}


def cap_result(tool: str, text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """The text cut at a line boundary within limit characters, with a note of what was cut.

    Args:
        tool: the tool that produced the text; it chooses the advice on narrowing.
        text: the result as the tool returned it.
        limit: the most characters kept of the text itself.

    Returns:
        The text unchanged when it fits, else its head and a note saying how many
        characters were cut and how to ask for less.
    """
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    kept = text[: cut if cut > limit // 2 else limit]
    hint = NARROWING_HINTS.get(tool, "ask for less at once")
    return (
        f"{kept}\n\n[Output too long: {len(text) - len(kept):,} of {len(text):,} characters "
        f"cut; tool results are capped at {limit:,} characters. To see the rest, {hint}.]"
    )
