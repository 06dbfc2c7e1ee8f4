"""Git's on-disk files written without git: an index listing paths, and trees of files."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

GITLINK_MODE, FILE_MODE = 0o160000, 0o100644


def index_bytes(
    paths: list[str], version: int = 2, gitlinks: frozenset[str] = frozenset()
) -> bytes:
    """A git index (SHA-1, version 2 or 4) listing paths, as `git update-index` writes one."""
    body, previous = b"", b""
    for path in sorted(paths):
        name = path.encode()
        mode = GITLINK_MODE if path in gitlinks else FILE_MODE
        fixed = struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + bytes(20)
        fixed += struct.pack(">H", min(len(name), 0xFFF))
        if version == 4:
            common = _common_prefix(previous, name)
            body += fixed + _varint(len(previous) - common) + name[common:] + b"\0"
        else:
            entry = fixed + name
            body += entry + bytes(((len(entry) + 8) & ~7) - len(entry))
        previous = name
    data = b"DIRC" + struct.pack(">II", version, len(paths)) + body
    return data + hashlib.sha1(data).digest()


def _common_prefix(first: bytes, second: bytes) -> int:
    length = 0
    while length < min(len(first), len(second)) and first[length] == second[length]:
        length += 1
    return length


def _varint(value: int) -> bytes:
    """git's offset encoding (the inverse of decode_varint)."""
    out = [value & 0x7F]
    value >>= 7
    while value:
        value -= 1
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(out))


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write each file (its parents made), text or bytes; returns root."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root
