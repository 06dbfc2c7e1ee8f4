"""Start the tool server: parse the command line, become the container's init, serve.

Run as a directory: ``python3 -I -S /opt/planrun/toolserver --workspace /workspace
--plan-dir /plan [--writable DIR]... [--extra-dir DIR]... [--git-seed FILE]``
(``python3 -I -m`` would not find a package mounted outside ``sys.path``).
"""

from __future__ import annotations

import os
import sys

if not __package__:
    # Started as a directory, sys.path[0] is this directory: its modules must not pass for
    # top-level ones. Its parent makes the package importable under its own name, and
    # __package__ lets the relative imports below find it (PEP 366); the spec of a
    # directory's __main__ names no package, so it goes.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if entry != _here] + [os.path.dirname(_here)]
    __package__ = os.path.basename(_here)
    __spec__ = None

import argparse
import signal
import threading
import time

from .processes import reap_orphans
from .server import DEFAULT_MAX_PLAN_BYTES, DEFAULT_MAX_PLAN_ENTRIES, ToolServer

ORPHAN_REAP_SECONDS = 0.5


def help_formatter(prog: str) -> argparse.HelpFormatter:
    # A fixed width keeps argparse from importing shutil (and bz2, lzma) at start-up.
    return argparse.HelpFormatter(prog, width=100)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="planrun in-container tool server", formatter_class=help_formatter
    )
    parser.add_argument("--workspace", default="/workspace")
    parser.add_argument("--plan-dir", default="/plan", help="writable, and copied out by the host")
    parser.add_argument("--writable", action="append", default=[], help="another writable root")
    parser.add_argument("--extra-dir", action="append", default=[], help="a read-only directory")
    parser.add_argument(
        "--guard-dir",
        action="append",
        default=[],
        help="a writable place commands may lay out a repository in (/tmp): the git guard walks it",
    )
    parser.add_argument("--max-plan-bytes", type=int, default=DEFAULT_MAX_PLAN_BYTES)
    parser.add_argument("--max-plan-entries", type=int, default=DEFAULT_MAX_PLAN_ENTRIES)
    parser.add_argument(
        "--scratch-layer", action="store_true", help="the workspace is a throw-away layer"
    )
    parser.add_argument(
        "--git-seed", help="the host's walk of the workspace, for the git guard to check"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    options = parse_args(argv)
    os.umask(0o022)
    server = ToolServer(
        options.workspace,
        options.plan_dir,
        options.extra_dir,
        (options.max_plan_bytes, options.max_plan_entries),
        options.writable,
        guard_dirs=options.guard_dir,
    )
    server.scratch_layer = options.scratch_layer
    server.git.seed = options.git_seed
    if os.getpid() == 1:
        # As the container's init: no signal handlers, so that no process inside can stop
        # the server (the kernel drops signals to PID 1 that it does not handle), and
        # orphans are collected here, as an init must.
        # Python handles SIGINT itself (KeyboardInterrupt); give it back to the kernel.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        threading.Thread(target=reap_forever, args=(server,), name="reaper", daemon=True).start()
    else:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda _signum, _frame: server.shutdown())
    server.serve()


def reap_forever(server: ToolServer) -> None:
    while True:
        time.sleep(ORPHAN_REAP_SECONDS)
        reap_orphans(server)


if __name__ == "__main__":
    main()
