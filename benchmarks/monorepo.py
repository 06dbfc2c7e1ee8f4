"""Generated git repositories of small Python files, made once and kept for `make bench`.

A tree of `size` files lays them out like a monorepo: 20 files per directory, 20 leaf
directories per module, 50 modules per package (so 1,000,000 files sit in ~52,500
directories), with a short history (a first commit holding everything, then commits that
each touch a few files) so that `git log`, `git blame` and `git diff` have work to do.

    python benchmarks/monorepo.py 1000000 [ROOT]

prints the repository's path; a repository already complete is reused (a marker file
written last says it is). `make bench` keeps them under build/monorepos, or under the
directory PLANRUN_BENCH_MONOREPOS names: there they are only used, never made or removed,
so that a shared directory's repositories are never remade under another bench's feet.
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
ROOT_VARIABLE = "PLANRUN_BENCH_MONOREPOS"
PROGRESS_STEPS = 10
"""How many times the writing of a repository's files is reported, at even steps."""
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


def is_complete(repository: Path) -> bool:
    """Whether the generator finished REPOSITORY (its marker is written last)."""
    return (repository / ".git" / COMPLETE_MARKER).exists()


def ensure_repository(
    size: int, root: Path = DEFAULT_ROOT, progress: Callable[[str], None] = lambda line: None
) -> Path:
    """The path of a complete generated repository of SIZE files under ROOT, told step by
    step to PROGRESS while it is made (a million files take minutes)."""
    repository = root / f"files-{size}"
    if is_complete(repository):
        return repository
    progress(f"generating {size:,} files in {repository}")
    if repository.exists():
        subprocess.run(["rm", "-rf", str(repository)], check=True)
    repository.mkdir(parents=True)
    made: set[str] = set()
    step = max(1, size // PROGRESS_STEPS)
    for index in range(size):
        if index and index % step == 0:
            progress(f"{index:,} of {size:,} files written")
        path = repository / file_path(index)
        parent = str(path.parent)
        if parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        path.write_text(file_text(index))
    (repository / "README.md").write_text(f"# Generated monorepo of {size} files\n")
    git = _git(repository)
    progress(f"{size:,} files written; git add and the first commit")
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", f"{size} generated files")
    progress(f"{HISTORY_COMMITS} more commits of a few files each")
    step = max(1, size // (HISTORY_COMMITS * 7))
    for revision in range(1, HISTORY_COMMITS + 1):
        for index in range(revision, size, step)[:5]:
            (repository / file_path(index)).write_text(file_text(index, revision))
        git("commit", "-q", "-a", "-m", f"Revision {revision}: adjust a few values")
    (repository / ".git" / COMPLETE_MARKER).write_text("complete\n")
    progress(f"{repository} is complete")
    return repository


def bench_root() -> tuple[Path, bool]:
    """Where the benchmarks' repositories live, and whether missing ones may be made there
    (not in a directory PLANRUN_BENCH_MONOREPOS names: that one is shared)."""
    named = os.environ.get(ROOT_VARIABLE)
    return (Path(named), False) if named else (DEFAULT_ROOT, True)


def _git(repository: Path) -> Callable[..., None]:
    env = {**os.environ, **GIT_ENV}

    def run(*arguments: str) -> None:
        # No automatic gc: a detached repack would go on changing .git after the marker.
        command = ["git", "-c", "gc.auto=0", *arguments]
        subprocess.run(command, cwd=repository, env=env, check=True)

    return run


if __name__ == "__main__":
    count = int(sys.argv[1])
    where = Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_ROOT
    print(ensure_repository(count, where, lambda line: print(line, file=sys.stderr, flush=True)))
