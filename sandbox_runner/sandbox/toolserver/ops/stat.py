"""ping and stat: what the host asks about the server and about one path."""

from __future__ import annotations

import json
import os
import stat

from ..arguments import file_type, printable, safe_readlink, str_arg
from ..protocol import JsonDict, Outcome

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..server import ToolServer


def op_ping(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    meta: JsonDict = {"workspace": server.workspace, "plan_dir": server.plan_dir}
    if server.warmed_up.is_set():
        meta["dumpable"] = server.dumpable
    first_look = server.git.first_look
    if first_look is not None:  # how long the git guard's first look took, and its seed
        meta["git_first_look_ms"] = round(first_look[0] * 1000, 1)
        meta["git_seeded_directories"] = first_look[1]
        meta["git_seed_wait_ms"] = round(server.git.seed_wait * 1000, 1)
    return Outcome("pong", meta=meta)


def op_stat(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path = server.resolve(str_arg(args, "path"))
    info = os.lstat(path)
    details: JsonDict = {
        "path": printable(path),
        "type": file_type(info.st_mode),
        "size": info.st_size,
        "mtime": info.st_mtime,
        "mode": oct(stat.S_IMODE(info.st_mode)),
        "uid": info.st_uid,
        "nlink": info.st_nlink,
    }
    if stat.S_ISLNK(info.st_mode):
        details["target"] = printable(safe_readlink(path))
    return Outcome(json.dumps(details, ensure_ascii=False), meta=details)
