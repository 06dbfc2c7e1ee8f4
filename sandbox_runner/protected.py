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

from sandbox_runner.paths import WORKSPACE_MOUNT

ROOT_NAMES = frozenset(
    {
        # git: hooks, config (fsmonitor, aliases, filters), info, modules, worktrees.
        ".git", ".gitmodules", ".gitconfig",
        # Agents: planrun's own settings, Claude Code's agents/commands/hooks/settings,
        # MCP servers, other agents' instructions and settings.
        ".planrun", ".claude", ".mcp.json", ".codex", ".gemini", ".cursor", ".agents",
        "CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "GEMINI.md", ".cursorrules",
        ".windsurfrules", ".clinerules", ".continue", ".aider.conf.yml", ".github",
        # Editors and IDEs: tasks and launch configurations run commands.
        ".vscode", ".idea", ".devcontainer", ".devcontainer.json", ".fleet", ".zed",
        # Shell and environment hooks.
        ".envrc", ".envrc.local", ".env", ".env.local", ".direnv", ".tool-versions",
        ".mise.toml", "mise.toml", ".mise.local.toml", "mise.local.toml", ".mise", "mise",
        ".rtx.toml",
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
        ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".inputrc", ".ripgreprc",
        ".config", ".local",
        # Commit hooks and their managers.
        ".pre-commit-config.yaml", ".pre-commit-hooks.yaml", ".husky", ".githooks",
        "lefthook.yml", ".lefthook.yml", "lefthook-local.yml",
        # Package managers whose config runs code on the user's next install or run.
        ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", ".yarn", "bunfig.toml",
        ".pypirc", "pip.conf", ".cargo", ".mvn", "gradle.properties", ".bundle",
        # Other version control and git's own extensions.
        ".hg", ".hgrc", ".lfsconfig",
    }
)  # fmt: skip
"""Names protected at the workspace's top: host tools read them there."""

ANYWHERE_NAMES = frozenset(
    {
        ".git", ".hg", ".envrc", ".envrc.local", ".direnv", ".tool-versions", ".mise.toml",
        ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", ".cargo",
        "CLAUDE.md", "AGENTS.md",
    }
)  # fmt: skip
"""Names protected at any depth: a nested repository, direnv, mise, package managers
(cargo reads `.cargo/` in every parent of where it runs) and agents (nested memory
files) read them in whichever directory the user works."""

ROOT_FOLDED = frozenset(name.casefold() for name in ROOT_NAMES)
ANYWHERE_FOLDED = frozenset(name.casefold() for name in ANYWHERE_NAMES)
"""Compared case-folded: on a case-insensitive file system (macOS, Windows) `.VSCODE`
opens as `.vscode`."""

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
    if parts[0].casefold() in ROOT_FOLDED:
        return _why(parts[0].casefold())
    for part in parts:
        if part.casefold() in ANYWHERE_FOLDED:
            return _why(part.casefold())
    return None


def protected_entry(relative: str) -> str:
    """The protected entry a protected path lies in (itself, or the directory holding it)."""
    parts = relative.split("/")
    if parts[0].casefold() in ROOT_FOLDED:
        return parts[0]
    depth = next(i for i, part in enumerate(parts) if part.casefold() in ANYWHERE_FOLDED)
    return "/".join(parts[: depth + 1])


def _why(name: str) -> str:
    if name in (".git", ".gitmodules", ".husky", ".githooks", ".hg", ".hgrc", ".lfsconfig"):
        return "version control runs what it holds on your machine"
    if name in (
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".pnpmfile.cjs",
        ".yarn",
        ".cargo",
        "bunfig.toml",
        ".pypirc",
        "pip.conf",
        ".mvn",
        "gradle.properties",
        ".bundle",
    ):
        return "your package manager or build tool runs what it says"
    if name in (".vscode", ".idea", ".devcontainer", ".devcontainer.json", ".fleet", ".zed"):
        return "your editor runs the tasks it defines"
    if name.startswith(
        (
            ".env",
            ".direnv",
            ".bash",
            ".zsh",
            ".profile",
            ".inputrc",
            ".tool",
            ".mise",
            "mise",
            ".rtx",
            ".config",
            ".local",
        )
    ):
        return "your shell runs it"
    if name.startswith(("lefthook", ".pre-commit")):
        return "your commit hooks run what it says"
    return "agents (planrun's included) read it as instructions"


def workspace_protection(container_path: str) -> tuple[str, str] | None:
    """For a container path under the workspace that is protected: its path relative to
    the workspace, and why it is protected. None for any other path."""
    path = posixpath.normpath(container_path)
    prefix = WORKSPACE_MOUNT.rstrip("/") + "/"
    if not path.startswith(prefix):
        return None
    relative = path[len(prefix) :]
    reason = protected_reason(relative)
    return (relative, reason) if reason else None
