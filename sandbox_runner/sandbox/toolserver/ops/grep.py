"""grep: ripgrep in content, files_with_matches or count mode, its output bounded."""

from __future__ import annotations

import os
import stat

from ..arguments import (
    bool_arg,
    cap_output,
    file_type,
    int_arg,
    opt_str_arg,
    plural,
    printable,
    str_arg,
)
from ..git_guard import SAFE_GIT_ENV
from ..processes import BoundedCapture, run_process
from ..protocol import MAX_OUTPUT_BYTES, JsonDict, Outcome, ToolError

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..server import ToolServer


# What is kept of ripgrep's output (lsp's searches too) before it is shaped.
GREP_STDOUT_LIMIT = 16 * 1024 * 1024
GREP_STDERR_LIMIT = 64 * 1024
# Lines (files, in files_with_matches mode) after which ripgrep is stopped: more than an
# answer can show (MAX_OUTPUT_BYTES), so a pattern matching everywhere costs no more.
GREP_MAX_LINES = 5000
GREP_NARROW = "narrow with path=, glob=, type= or a more specific pattern"
GREP_MODES = ("files_with_matches", "content", "count")
CONTEXT_FLAGS = (("-C", "--context"), ("-A", "--after-context"), ("-B", "--before-context"))


def rg_argv(args: JsonDict, mode: str, pattern: str, root: str) -> list[str]:
    """Build ripgrep's argument list; the pattern goes after -e so a leading '-' is safe."""
    argv = ["rg", "--no-config", "--color", "never", "--hidden"]
    argv += ["--max-columns", "500", "--max-columns-preview"]
    if bool_arg(args, "-i", False):
        argv.append("--ignore-case")
    if bool_arg(args, "multiline", False):
        argv += ["--multiline", "--multiline-dotall"]
    globs = args.get("glob")
    for glob in [globs] if isinstance(globs, str) else globs if isinstance(globs, list) else []:
        if isinstance(glob, str) and glob:
            argv += ["--glob", glob]
    file_type_name = opt_str_arg(args, "type")
    if file_type_name:
        argv += ["--type", file_type_name]
    # Last, so that no user glob can re-include the repository's .git directory.
    argv += ["--glob", "!.git"]
    if mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif mode == "count":
        # No --sort here: it makes rg single-threaded; the lines are sorted afterwards.
        argv += ["--count", "--with-filename"]
    else:
        argv += ["--sort", "path"]
        argv.append("--line-number" if bool_arg(args, "-n", True) else "--no-line-number")
        for key, flag in CONTEXT_FLAGS:
            lines = int_arg(args, key, 0)
            if lines:
                argv += [flag, str(lines)]
    return [*argv, "-e", pattern, "--", root]


def op_grep(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    pattern = str_arg(args, "pattern", allow_empty=True)
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    kind = os.stat(root).st_mode
    if not (stat.S_ISDIR(kind) or stat.S_ISREG(kind)):
        # ripgrep would wait on a FIFO for as long as nobody writes to it.
        raise ToolError(f"Not a regular file ({file_type(kind)}): {printable(root)}")
    mode = opt_str_arg(args, "output_mode") or "files_with_matches"
    if mode not in GREP_MODES:
        raise ToolError(f"Invalid output_mode {mode!r}: expected one of {', '.join(GREP_MODES)}")
    head_limit = int_arg(args, "head_limit", 0)
    argv = rg_argv(args, mode, pattern, root)
    try:
        result = run_process(
            server,
            argv,
            timeout=timeout,
            limits=(GREP_STDOUT_LIMIT, GREP_STDERR_LIMIT),
            cwd="/",
            git_env=SAFE_GIT_ENV,
            stop_after=(GREP_MAX_LINES, b"\n"),
        )
    except FileNotFoundError:
        raise ToolError("ripgrep (rg) is not installed in the sandbox") from None
    if result.timed_out:
        raise ToolError(f"grep timed out after {timeout:g} s; {GREP_NARROW}", timed_out=True)
    stdout = result.stdout.data()
    errors = result.stderr.data().decode("utf-8", "replace").strip().splitlines()
    # Stopped at GREP_MAX_LINES, rg was killed: it had found matches.
    code = 0 if result.stdout.stopped else result.returncode
    meta: JsonDict = {"rg_exit": code, "stopped": result.stdout.stopped}
    if not stdout:
        if code == 1 or (code == 0 and not errors):
            return Outcome("No matches found", exit_code=code, meta=meta)
        raise ToolError("rg: " + " / ".join(line.strip() for line in errors[:6] if line.strip()))
    text, truncated = format_grep(mode, stdout, result.stdout, head_limit)
    if code == 2 and errors:
        text += f"\n[some files could not be searched: {errors[0].strip()}]"
    return Outcome(text, truncated=truncated, exit_code=code, meta=meta)


def format_grep(
    mode: str, stdout: bytes, capture: BoundedCapture, head_limit: int
) -> tuple[str, bool]:
    """Shape rg's output per mode, apply head_limit and the overall output cap."""
    stopped = capture.stopped
    at_least = "at least " if stopped else ""
    if mode == "files_with_matches":
        paths = sorted_by_mtime([os.fsdecode(line) for line in stdout.splitlines()])
        total = len(paths) + capture.dropped_lines
        lines = [printable(path) for path in paths]
        header = f"Found {at_least}{plural(total, 'file')}"
        unit = "files"
    else:
        lines = stdout.decode("utf-8", "replace").splitlines()
        total = len(lines) + capture.dropped_lines
        header = ""
        unit = "lines"
        if mode == "count":
            lines.sort()
            counts = [int(line.rpartition(":")[2] or 0) for line in lines if line[-1:].isdigit()]
            header = (
                f"Found {at_least}{plural(sum(counts), 'matching line')} in "
                f"{at_least}{plural(len(counts), 'file')}"
            )
    cut = bool(head_limit) and total > head_limit
    if cut:
        lines = lines[:head_limit]
        lines.append(f"[showing first {head_limit} of {at_least}{total} {unit} (head_limit)]")
    elif capture.dropped:
        lines.append(f"[rg output exceeded {GREP_STDOUT_LIMIT} bytes; {capture.dropped} dropped]")
    if mode == "files_with_matches":
        lines.insert(0, header)
    if stopped:
        # First, where a cut of the output cannot hide it.
        lines.insert(0, f"[the search stopped after {total} {unit}; more match: {GREP_NARROW}]")
    footer = f"\n\n{header}" if mode == "count" else ""
    text, capped = cap_output("\n".join(lines), limit=MAX_OUTPUT_BYTES - len(footer) - 64)
    return text + footer, cut or capped or stopped or bool(capture.dropped)


def sorted_by_mtime(paths: list[str]) -> list[str]:
    """Newest first, then by path, as Claude Code's Grep lists files."""

    def key(path: str) -> tuple[int, str]:
        try:
            return -os.stat(path).st_mtime_ns, path
        except OSError:
            return 0, path

    return sorted(paths, key=key)
