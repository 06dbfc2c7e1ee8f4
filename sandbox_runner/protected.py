"""What a work sandbox may not write although the workspace is writable: the files that
host tools execute, or that planrun and other agents read as instructions.

Anthropic's sandbox-runtime keeps a "mandatory deny" list of the same kind (git hooks
and config, IDE and agent settings, shell rc files); this one goes further: package
manager configs that run code (`.npmrc`'s `node-options`, `.yarnrc.yml`'s `yarnPath`,
`.pnpmfile.cjs`), direnv files at any depth, and every `.git` below the workspace, not
only its top one.
"""

from __future__ import annotations

import posixpath

ROOT_NAMES = frozenset(
    {
        # git: hooks, config (fsmonitor, aliases, filters), info, modules, worktrees.
        ".git", ".gitmodules",
        # Agents: planrun's own settings, Claude Code's agents/commands/hooks/settings,
        # MCP servers, other agents' instructions and settings.
        ".planrun", ".claude", ".mcp.json", ".codex", ".gemini", ".cursor", ".agents",
        "CLAUDE.md", "CLAUDE.local.md", "AGENTS.md",
        # Editors and IDEs: tasks and launch configurations run commands.
        ".vscode", ".idea", ".devcontainer", ".fleet", ".zed",
        # Shell and environment hooks.
        ".envrc", ".env.rc", ".tool-versions", ".mise.toml", "mise.toml",
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
        ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".inputrc",
        ".config", ".local",
        # Commit hooks and their managers.
        ".pre-commit-config.yaml", ".pre-commit-hooks.yaml", ".husky", ".githooks",
        "lefthook.yml", ".lefthook.yml", "lefthook-local.yml",
        # Package managers whose config runs code on the user's next install or run.
        ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", ".yarn",
        ".pypirc", "pip.conf", ".cargo",
    }
)  # fmt: skip
"""Names protected at the workspace's top: host tools read them there."""

ANYWHERE_NAMES = frozenset({".git", ".envrc", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs"})
"""Names protected at any depth: a nested repository, direnv and package managers read
them in whichever directory the user runs them."""

GIT_DIRECTORY_MARKERS = ("HEAD", "objects", "refs")
"""What makes git take a directory for a repository (`safe.bareRepository` defaults to
`all`): a HEAD file beside objects/ and refs/."""


def protected_reason(relative: str) -> str | None:
    """Why a path below the workspace (relative, `/`-separated) is protected, or None.

    Every path at or below a protected entry is protected too.
    """
    parts = [part for part in posixpath.normpath(relative).split("/") if part not in ("", ".")]
    if not parts or parts[0] == "..":
        return None
    if parts[0] in ROOT_NAMES:
        return _why(parts[0])
    for part in parts[:-1]:
        if part in ANYWHERE_NAMES:
            return _why(part)
    if parts[-1] in ANYWHERE_NAMES:
        return _why(parts[-1])
    return None


def _why(name: str) -> str:
    if name in (".git", ".gitmodules", ".husky", ".githooks"):
        return "git runs what it holds on your machine"
    if name in (".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", ".yarn", ".cargo"):
        return "your package manager runs what it says"
    if name in (".vscode", ".idea", ".devcontainer", ".fleet", ".zed"):
        return "your editor runs the tasks it defines"
    if name.startswith((".env", ".bash", ".zsh", ".profile", ".inputrc", ".tool", ".mise")):
        return "your shell runs it"
    if name.startswith(("lefthook", ".pre-commit")):
        return "your commit hooks run what it says"
    return "agents (planrun's included) read it as instructions"


def container_relative(container_path: str, workspace_mount: str) -> str | None:
    """The part of a container path below the workspace mount, or None outside it."""
    path = posixpath.normpath(container_path)
    if path == workspace_mount:
        return ""
    prefix = workspace_mount.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None
