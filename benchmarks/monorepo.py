"""Generated git repositories of small Python files, made once and kept for `make bench`.

A tree of `size` files lays them out like a monorepo: 20 files per directory, 20 leaf
directories per module, 50 modules per package (so 1,000,000 files sit in ~52,500
directories), with a short history (a first commit holding everything, then commits that
each touch a few files) so that `git log`, `git blame` and `git diff` have work to do.

    python benchmarks/monorepo.py 1000000 [ROOT]

prints the repository's path; a repository already complete is reused (a marker file
written last says it is).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

FILES_PER_DIRECTORY = 20
DIRECTORIES_PER_MODULE = 20
MODULES_PER_PACKAGE = 50
HISTORY_COMMITS = 12
DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "build" / "monorepos"
COMPLETE_MARKER = ".planrun-bench-complete"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def file_path(index: int) -> str:
    """The repository-relative path of the index-th generated file."""
    directory, file = divmod(index, FILES_PER_DIRECTORY)
    module, leaf = divmod(directory, DIRECTORIES_PER_MODULE)
    package, module = divmod(module, MODULES_PER_PACKAGE)
    return f"pkg{package:03d}/mod{module:02d}/d{leaf:02d}/f{file:02d}.py"


def file_text(index: int, revision: int = 0) -> str:
    return (
        f'"""Generated module {index}."""\n\n\n'
        f"def value_{index}() -> int:\n    return {index + revision}\n"
    )


def ensure_repository(size: int, root: Path = DEFAULT_ROOT) -> Path:
    """The path of a complete generated repository of SIZE files under ROOT."""
    repository = root / f"files-{size}"
    if (repository / ".git" / COMPLETE_MARKER).exists():
        return repository
    if repository.exists():
        subprocess.run(["rm", "-rf", str(repository)], check=True)
    repository.mkdir(parents=True)
    made: set[str] = set()
    for index in range(size):
        path = repository / file_path(index)
        parent = str(path.parent)
        if parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        path.write_text(file_text(index))
    (repository / "README.md").write_text(f"# Generated monorepo of {size} files\n")
    git = _git(repository)
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", f"{size} generated files")
    step = max(1, size // (HISTORY_COMMITS * 7))
    for revision in range(1, HISTORY_COMMITS + 1):
        for index in range(revision, size, step)[:5]:
            (repository / file_path(index)).write_text(file_text(index, revision))
        git("commit", "-q", "-a", "-m", f"Revision {revision}: adjust a few values")
    (repository / ".git" / COMPLETE_MARKER).write_text("complete\n")
    return repository


def _git(repository: Path) -> Callable[..., None]:
    env = {**os.environ, **GIT_ENV}

    def run(*arguments: str) -> None:
        subprocess.run(["git", *arguments], cwd=repository, env=env, check=True)

    return run


if __name__ == "__main__":
    count = int(sys.argv[1])
    where = Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_ROOT
    print(ensure_repository(count, where))
