"""Names the whole program shares: the model aliases and the read-only tools."""

from __future__ import annotations

INHERIT = "inherit"
"""An agent's model when it uses its parent's (the session's or the CLI's)."""
MODEL_ALIASES: dict[str, str] = {
    "sonnet": "claude-sonnet-4-6",
    "opus": "claude-opus-4-8",
    "haiku": "claude-haiku-4-5",
}
"""The model aliases agent files may use, and the model ids they stand for."""
READ_ONLY_TOOLS: tuple[str, ...] = ("Glob", "Grep", "Read", "Bash", "LS", "LSP")
"""The tools a read-only agent may be offered (Bash through the read-only classifier)."""
