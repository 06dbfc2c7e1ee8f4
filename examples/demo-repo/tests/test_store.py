from pathlib import Path

from todo.store import TaskStore


def test_add_and_complete(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "tasks.json")
    task = store.add("write the report")
    assert store.complete(task.id).done
    assert [t.title for t in store.load()] == ["write the report"]
