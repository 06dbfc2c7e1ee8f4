"""Directory trees deeper than Python's recursion limit, made and removed in loops:
os.makedirs and shutil.rmtree recurse once per level on Python 3.11, and so does pytest's
own removal of old tmp_path directories, which such a tree left behind would break for
every later test session on the machine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def deep_tree(root: Path, depth: int) -> Iterator[Path]:
    """ROOT with directories named d DEPTH levels deep; yields the deepest, and removes
    ROOT with all it holds afterwards."""
    root.mkdir()
    try:
        directory = root
        for _ in range(depth):
            directory = directory / "d"
            directory.mkdir()
        yield directory
    finally:
        remove_tree(root)


def remove_tree(root: Path) -> None:
    """rm -r ROOT without recursion (links are removed, never followed)."""
    directories: list[str] = []
    stack = [str(root)]
    while stack:
        directory = stack.pop()
        directories.append(directory)
        with os.scandir(directory) as scan:
            for entry in scan:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.unlink(entry.path)
    for directory in reversed(directories):
        os.rmdir(directory)
