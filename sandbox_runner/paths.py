"""Where things are: planrun's per-user directory on the host, and the fixed paths inside
every sandbox container."""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE_MOUNT = "/workspace"
"""The repository inside a sandbox."""
PLAN_MOUNT = "/plan"
"""The plan directory inside a sandbox."""
EXTRA_MOUNT_ROOT = "/ro"
"""Where the extra read-only directories appear inside a sandbox (/ro/<name>)."""


def planrun_home() -> Path:
    """planrun's per-user directory: $PLANRUN_HOME, or ~/.planrun."""
    configured = os.environ.get("PLANRUN_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".planrun"


def claude_home() -> Path:
    """Claude Code's per-user directory, whose agents/ planrun reads too: $CLAUDE_CONFIG_DIR
    (as Claude Code itself honours it), or ~/.claude."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"
