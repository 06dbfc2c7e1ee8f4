"""A batch file (YAML for people, JSONL for generators): its tasks, checked before anything runs."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sandbox_runner.config_values import checked, field_name
from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

MAX_BATCH_FILE_BYTES = 1024 * 1024
MAX_REQUIREMENTS_BYTES = 1024 * 1024
TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TASK_KEYS = frozenset(
    {
        "id",
        "requirements",
        "requirements_file",
        "repo",
        "perspectives",
        "context",
        "template",
        "overrides",
        "agent",
        "model",
    }
)
FORBIDDEN_OVERRIDES = frozenset({"image"})
"""The sandbox image is the operator's, never a batch file's."""


class BatchFileError(ConfigError):
    """A batch file that cannot be run, naming the file, the task and the key."""

    def __init__(self, path: Path, problem: str, task: str | None = None) -> None:
        where = f"{path}: task {task!r}" if task is not None else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.task = task


@dataclass(frozen=True)
class BatchTask:
    """One task of a batch: what to plan, in which repository, from which perspectives."""

    id: str
    requirements: str
    repo: Path
    perspectives: tuple[str, ...] = ()
    context: tuple[Path, ...] = ()
    template: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    """Config-file keys (normalised and checked), with the precedence of flags."""
    agent: str = "Plan"
    model: str | None = None


@dataclass(frozen=True)
class BatchFile:
    """A parsed batch file."""

    path: Path
    tasks: list[BatchTask]
    digest: str
    """sha256 of the file's bytes, for the manifest."""


def load_batch_file(path: Path) -> BatchFile:
    """Read and check a batch file; relative paths resolve against its directory.

    Raises:
        BatchFileError: unreadable, malformed, or a task with a bad or missing key.
    """
    import hashlib

    path = path.expanduser().absolute()
    try:
        data = read_untrusted_bytes(path, MAX_BATCH_FILE_BYTES)
    except UnsafeFileError as error:
        raise BatchFileError(path, str(error)) from None
    except OSError as error:
        raise BatchFileError(path, f"cannot read it: {error.strerror}") from None
    if data is None:
        raise BatchFileError(path, "no such file")
    text = data.decode("utf-8", errors="replace")
    raw_tasks, defaults = _entries(path, text)
    tasks: list[BatchTask] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_tasks, start=1):
        if not isinstance(raw, Mapping):
            raise BatchFileError(path, f"task {index} is not a mapping of keys")
        task = _task(path, {**defaults, **raw}, index)
        if task.id in seen:
            raise BatchFileError(path, "key 'id': used by two tasks", task.id)
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise BatchFileError(path, "no tasks")
    return BatchFile(path, tasks, hashlib.sha256(data).hexdigest())


def _entries(path: Path, text: str) -> tuple[list[Any], dict[str, Any]]:
    """The raw tasks and defaults of a YAML document or of JSONL lines."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        tasks = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                tasks.append(json.loads(line))
            except ValueError as error:
                raise BatchFileError(path, f"line {number} is not JSON: {error}") from None
        return tasks, {}
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise BatchFileError(path, f"not valid YAML: {error}".splitlines()[0]) from None
    if isinstance(document, list):
        return document, {}
    if not isinstance(document, Mapping):
        raise BatchFileError(path, "expected a mapping with `tasks:` (or a list of tasks)")
    unknown = set(document) - {"version", "defaults", "tasks"}
    if unknown:
        raise BatchFileError(path, f"unknown top-level key {sorted(unknown)[0]!r}")
    if document.get("version", 1) != 1:
        raise BatchFileError(path, "key 'version': only version 1 is known")
    defaults: Any = document.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise BatchFileError(path, "key 'defaults' must be a mapping")
    if "id" in defaults:
        raise BatchFileError(path, "key 'defaults': cannot set 'id'")
    listed = document.get("tasks")
    if not isinstance(listed, list):
        raise BatchFileError(path, "key 'tasks' must be a list")
    return listed, dict(defaults)


def _task(path: Path, raw: Mapping[str, Any], index: int) -> BatchTask:
    task_id = raw.get("id")
    if not isinstance(task_id, str) or not TASK_ID.fullmatch(task_id):
        raise BatchFileError(
            path,
            f"task {index}: key 'id' must be 1-64 letters, digits, '.', '_' or '-' "
            f"(it names a directory), got {task_id!r}",
        )

    def fail(key: str, problem: str) -> BatchFileError:
        return BatchFileError(path, f"key {key!r}: {problem}", task_id)

    unknown = sorted(set(raw) - TASK_KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown key; known keys: {', '.join(sorted(TASK_KEYS))}")
    base = path.parent
    repo = _text(raw.get("repo", "."), "repo", fail)
    return BatchTask(
        id=task_id,
        requirements=_requirements(raw, base, fail),
        repo=(base / Path(repo).expanduser()).resolve(),
        perspectives=tuple(_texts(raw.get("perspectives", []), "perspectives", fail)),
        context=tuple(
            (base / Path(p).expanduser()).resolve()
            for p in _texts(raw.get("context", []), "context", fail)
        ),
        template=_optional_path(raw.get("template"), base, "template", fail),
        overrides=_overrides(raw.get("overrides") or {}, f"{path}: task {task_id!r}", fail),
        agent=_text(raw.get("agent", "Plan"), "agent", fail),
        model=_optional_text(raw.get("model"), "model", fail),
    )


Fail = Any


def _requirements(raw: Mapping[str, Any], base: Path, fail: Fail) -> str:
    inline, file = raw.get("requirements"), raw.get("requirements_file")
    if (inline is None) == (file is None):
        raise fail("requirements", "give exactly one of `requirements` and `requirements_file`")
    if inline is not None:
        return _text(inline, "requirements", fail)
    target = base / Path(_text(file, "requirements_file", fail)).expanduser()
    try:
        data = read_untrusted_bytes(target, MAX_REQUIREMENTS_BYTES)
    except (UnsafeFileError, OSError) as error:
        raise fail("requirements_file", str(error)) from None
    if data is None:
        raise fail("requirements_file", f"{target} does not exist")
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise fail("requirements_file", f"{target} is empty")
    return text


def _overrides(raw: object, where: str, fail: Fail) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise fail("overrides", "must be a mapping of config keys")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = field_name(key, f"{where}: overrides")
        if name in FORBIDDEN_OVERRIDES:
            raise fail(f"overrides.{key}", "the sandbox image cannot be set by a batch file")
        values[name] = checked(name, value, f"{where}: overrides", str(key))
    return values


def _text(value: object, key: str, fail: Fail) -> str:
    if not isinstance(value, str) or not value.strip():
        raise fail(key, f"must be a non-empty string, got {value!r:.60}")
    return value


def _optional_text(value: object, key: str, fail: Fail) -> str | None:
    return None if value is None else _text(value, key, fail)


def _texts(value: object, key: str, fail: Fail) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise fail(key, "must be a list of non-empty strings")
    return list(value)


def _optional_path(value: object, base: Path, key: str, fail: Fail) -> Path | None:
    if value is None:
        return None
    return (base / Path(_text(value, key, fail)).expanduser()).resolve()
