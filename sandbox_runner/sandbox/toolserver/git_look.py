"""Everything git may read in the workspace, kept up to date in two tiers: the tree (where
repositories are) and the repositories themselves (what git reads from them)."""

from __future__ import annotations

import os

from .arguments import is_within, printable
from .git_config import expand_git_path, git_config_variables, split_variable
from .git_scan import (
    GIT_CONFIG_MAX_FILES,
    GIT_MAX_REPOSITORIES,
    GitRefusal,
    RepositoryScan,
    Stamp,
    Variable,
    changed,
    read_git_file,
    require_stable,
    require_unblocking,
    stamp_from,
    stamp_of,
)
from .git_tree import WorkspaceTree


class GitModules:
    """The submodule names of one `.gitmodules` file."""

    def __init__(self, path: str) -> None:
        self.stamps: dict[str, Stamp | None] = {}
        self.names: dict[bytes, None] = {}
        self.refusal: str | None = None
        try:
            data = read_git_file(path, self.stamps)
        except GitRefusal as refusal:
            self.refusal = str(refusal)
            return
        for variable, _ in git_config_variables(data or b""):
            section, subsection, _ = split_variable(variable)
            if section == b"submodule" and subsection is not None:
                self.names[subsection] = None


class GitLook:
    """The git guard's view of the workspace.

    `tree_tier` looks at the trees again (a stat per directory: for a repository or a
    `.gitmodules` that appeared or went) and at the inner directories of the git
    directories; `git_tier` at what git reads from the repositories found (a few stats
    per repository). Only the repositories and files whose stamps moved are read again;
    `combine` then takes the union of what they define.
    """

    def __init__(self, roots: list[str]) -> None:
        self.roots = [os.path.realpath(root) for root in roots]
        self.tree = WorkspaceTree(self.roots)
        self.repositories: dict[str, RepositoryScan] = {}
        self.gitmodules: dict[str, GitModules] = {}
        self.stamps: dict[str, Stamp | None] = {}
        """What the last combine looked at: the files that path settings name."""
        self.synced = False
        """Whether the repositories and `.gitmodules` follow the tree: not before the
        first look, even when a seed (git_seed) left the tree nothing to change."""

    def tree_tier(self) -> bool:
        """Look at the trees again; whether what git may read changed."""
        moved = False
        if self.tree.refresh() or not self.synced:
            self.synced = True
            moved = True
            dot_gits = dict.fromkeys(self.tree.dot_gits())
            for gone in self.repositories.keys() - dot_gits.keys():
                del self.repositories[gone]
            for dot_git in dot_gits.keys() - self.repositories.keys():
                self.repositories[dot_git] = RepositoryScan(dot_git, self.roots).run()
            listed = dict.fromkeys(self.tree.gitmodules())
            for gone in self.gitmodules.keys() - listed.keys():
                del self.gitmodules[gone]
            for path in listed.keys() - self.gitmodules.keys():
                self.gitmodules[path] = GitModules(path)
        for dot_git, scan in self.repositories.items():
            if not scan.recheck():
                self.repositories[dot_git] = RepositoryScan(dot_git, self.roots).run()
                moved = True
        return moved

    def git_tier(self) -> bool:
        """Look again at what git reads from the repositories found; whether it changed."""
        moved = False
        for dot_git, scan in self.repositories.items():
            if changed(scan.stamps):
                self.repositories[dot_git] = RepositoryScan(dot_git, self.roots).run()
                moved = True
        for path, modules in self.gitmodules.items():
            if changed(modules.stamps):
                self.gitmodules[path] = GitModules(path)
                moved = True
        return moved or changed(self.stamps)

    def combine(self) -> tuple[dict[Variable, None], dict[bytes, None]]:
        """The variables that every repository's config files define and the submodules
        named anywhere; GitRefusal for what cannot be checked."""
        self.stamps = {}
        refusal = self.tree.refusal()
        scans = list(self.repositories.values())
        refusals = [refusal, *(scan.refusal for scan in scans)]
        refusals += [modules.refusal for modules in self.gitmodules.values()]
        first = next((reason for reason in refusals if reason is not None), None)
        if first is not None:
            raise GitRefusal(first)
        if len(set().union(*(scan.git_dirs for scan in scans))) > GIT_MAX_REPOSITORIES:
            raise GitRefusal(f"over {GIT_MAX_REPOSITORIES} repositories to check")
        files = len(set().union(*(scan.files for scan in scans))) + len(self.gitmodules)
        if files > GIT_CONFIG_MAX_FILES:
            raise GitRefusal(f"more than {GIT_CONFIG_MAX_FILES} config files to check")
        variables: dict[Variable, None] = {}
        submodules: dict[bytes, None] = {}
        worktrees = dict.fromkeys(self.tree.tops)
        for scan in scans:
            variables.update(scan.variables)
            submodules.update(scan.submodules)
            worktrees.update(scan.worktrees)
        for modules in self.gitmodules.values():
            submodules.update(modules.names)
        worktrees.update(self.core_worktrees(scans))
        self.check_path_settings(scans, worktrees)
        return variables, submodules

    def core_worktrees(self, scans: list[RepositoryScan]) -> dict[str, None]:
        """A worktree elsewhere holds repositories of its own: it must be one walked."""
        found: dict[str, None] = {}
        for scan in scans:
            for worktree in scan.core_worktrees:
                require_stable(worktree, self.roots)
                real = os.path.realpath(worktree)
                self.stamps[worktree] = stamp_of(worktree)
                if not any(is_within(real, top) for top in self.tree.tops):
                    shown = printable(worktree)
                    raise GitRefusal(f"core.worktree {shown} is outside the workspace")
                found[real] = None
        return found

    def check_path_settings(self, scans: list[RepositoryScan], worktrees: dict[str, None]) -> None:
        """The files that path settings name, from wherever git may run."""
        values = dict.fromkeys(value for scan in scans for value in scan.paths)
        for value in values:
            for base in worktrees:
                path = expand_git_path(value, base)
                require_stable(path, self.roots)
                try:
                    info = os.stat(path)
                except (OSError, ValueError):
                    self.stamps[path] = None
                    continue
                self.stamps[path] = stamp_from(info)
                require_unblocking(path, info)
