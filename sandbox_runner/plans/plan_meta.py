"""A plan's side record, `<plan>.meta.json` beside the plan file: when it was accepted, where
it was exported to, and a session plan's proposed patches. Written only by planrun on the
host, never inside a sandbox; read bounded, and a damaged file reads as empty."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes

MAX_META_BYTES = 512 * 1024
MAX_ENTRIES = 50
"""The most entries one list keeps (the newest)."""


def meta_path(plan_file: Path) -> Path:
    """The side record of PLAN_FILE: `<name>.meta.json` in the same directory."""
    return plan_file.with_name(plan_file.stem + ".meta.json")


def read_meta(plan_file: Path) -> dict[str, Any]:
    """The side record of PLAN_FILE; {} when there is none or it cannot be read."""
    try:
        data = read_untrusted_bytes(meta_path(plan_file), MAX_META_BYTES, follow_symlinks=False)
        value = json.loads(data) if data else {}
    except (UnsafeFileError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def set_meta(plan_file: Path, key: str, value: Any) -> None:
    """Set KEY of the side record, atomically (a crash leaves the old record or the new)."""
    record = read_meta(plan_file)
    record[key] = value
    target = meta_path(plan_file)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".meta-")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        json.dump(record, file, indent=2, ensure_ascii=False)
    os.replace(temporary, target)


def add_entry(plan_file: Path, key: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Append ENTRY, stamped with `at` (UTC, ISO 8601), to the list KEY of the side
    record; the list keeps its newest MAX_ENTRIES. Returns the stamped entry."""
    stamped = {"at": datetime.now(UTC).isoformat(timespec="seconds"), **entry}
    found = read_meta(plan_file).get(key)
    entries = [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []
    set_meta(plan_file, key, [*entries, stamped][-MAX_ENTRIES:])
    return stamped


def entries(plan_file: Path, key: str) -> list[dict[str, Any]]:
    """The entries of the list KEY (the well-formed ones)."""
    found = read_meta(plan_file).get(key)
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []
