"""In-container tool server: answers JSON-line tool requests on stdin/stdout, one thread each.

This directory is bind-mounted read-only into the sandbox and started there as the main
process (``python3 -I -S /opt/planrun/toolserver --workspace /workspace --plan-dir /plan``,
see ``__main__``), so it uses the standard library only and imports nothing but itself:
never ``sandbox_runner``. The host writes one request per line, ``{"id", "op", "args",
"timeout"}``, and reads one response per line, ``{"id", "ok", "output", "exit_code",
"timed_out", "truncated", "error", "meta"}`` (``protocol``).

The ops (``ops/``, one module each) are shaped like the Claude Code tools models are
trained on: read, glob, grep, ls, bash, write, edit, LSP (universal-ctags and ripgrep, no
language server), plus ping, stat, plan_files and plan_read for the host. Every output is
bounded and says when it was cut; every failure is a one-line message for the model, never
a traceback.
"""
