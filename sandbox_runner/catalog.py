"""Names the whole program shares: the model aliases and the read-only tools."""

from __future__ import annotations

import re

INHERIT = "inherit"
"""An agent's model when it uses its parent's (the session's or the CLI's)."""
MODEL_ALIASES: dict[str, str] = {
    "sonnet": "claude-sonnet-4-6",
    "opus": "claude-opus-4-8",
    "haiku": "claude-haiku-4-5",
}
"""The model aliases agent files may use, and the model ids they stand for."""
MODEL_ID = re.compile(r"claude-[a-z0-9][a-z0-9.\-]*", re.IGNORECASE)
"""What a model id looks like (sent to the API as written)."""
READ_ONLY_TOOLS: tuple[str, ...] = ("Glob", "Grep", "Read", "Bash", "LS", "LSP")
"""The tools a read-only agent may be offered (Bash through the read-only classifier)."""
WEB_TOOLS: tuple[str, ...] = ("WebFetch", "WebSearch")
"""Research on the web, read-only: offered only when the user grants hosts (web_grant)."""


def model_id_for(name: str) -> str | None:
    """The model id NAME stands for: an alias resolved, a `claude-…` id as written; None
    for anything else (sent to the API, it would fail every request)."""
    name = name.strip()
    if name.casefold() in MODEL_ALIASES:
        return MODEL_ALIASES[name.casefold()]
    return name if MODEL_ID.fullmatch(name) else None


CUSTOM_PERSPECTIVE = "custom:"
"""Written before a perspective's name, it says the name is meant as written: never a
preset, never taken for a misspelt one (`--perspective custom:thorugh`)."""
