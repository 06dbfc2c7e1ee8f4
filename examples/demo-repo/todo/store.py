"""Tasks on disk: one JSON file, read and written whole."""

from __future__ import annotations

import json
from pathlib import Path

from todo.models import Task


class TaskStore:
    """Loads and saves the task list."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[Task]:
        if not self.path.exists():
            return []
        return [Task.from_dict(item) for item in json.loads(self.path.read_text())]

    def save(self, tasks: list[Task]) -> None:
        self.path.write_text(json.dumps([task.to_dict() for task in tasks], indent=2))

    def add(self, title: str) -> Task:
        tasks = self.load()
        task = Task(id=max((t.id for t in tasks), default=0) + 1, title=title)
        tasks.append(task)
        self.save(tasks)
        return task

    def complete(self, task_id: int) -> Task:
        tasks = self.load()
        for task in tasks:
            if task.id == task_id:
                task.done = True
                self.save(tasks)
                return task
        raise KeyError(task_id)
