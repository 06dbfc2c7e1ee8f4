"""Directory trees deeper than Python's recursion limit, made and removed in loops:
os.makedirs and shutil.rmtree recurse once per level on Python 3.11, and so does pytest's
own removal of old tmp_path directories, which such a tree left behind would break for
every later test session on the machine. The tree is removed with planrun's own
sandbox_runner.tree_walk.remove_tree."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sandbox_runner.tree_walk import remove_tree


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
