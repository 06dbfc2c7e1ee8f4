"""The `todo` command."""

from __future__ import annotations

import argparse
from pathlib import Path

from todo.store import TaskStore

DEFAULT_PATH = Path.home() / ".todo.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="todo")
    parser.add_argument("--file", type=Path, default=DEFAULT_PATH)
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add")
    add.add_argument("title")
    commands.add_parser("list")
    done = commands.add_parser("done")
    done.add_argument("id", type=int)
    args = parser.parse_args(argv)

    store = TaskStore(args.file)
    if args.command == "add":
        task = store.add(args.title)
        print(f"added {task.id}: {task.title}")
    elif args.command == "list":
        for task in store.load():
            mark = "x" if task.done else " "
            print(f"[{mark}] {task.id}: {task.title}")
    elif args.command == "done":
        task = store.complete(args.id)
        print(f"done {task.id}: {task.title}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
