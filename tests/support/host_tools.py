"""The command-line tools some unit tests run on the host (the tool server's Grep and LSP,
run in-process): found, or installed (root on Debian), else a one-line error that says what
to install. `python -m tests.support.host_tools` is make test's step for them.
"""

from __future__ import annotations

import shutil
import sys

from sandbox_runner.errors import PlanrunError
from sandbox_runner.sandbox.docker_engine import apt_install

TOOLS = {"rg": "ripgrep", "ctags": "universal-ctags"}
"""Each command, and the Debian package that has it."""


def missing() -> dict[str, str]:
    """The tools not on PATH, with their packages."""
    return {name: package for name, package in TOOLS.items() if shutil.which(name) is None}


def main() -> int:
    absent = missing()
    if not absent:
        return 0
    try:
        apt_install(sorted(set(absent.values())), progress=lambda line: print(line, flush=True))
    except PlanrunError as error:
        print(f"host tools: {error}", file=sys.stderr)
        return 1
    still = missing()
    if still:
        print(f"host tools: still missing {', '.join(still)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
