"""What lsp is built on: ctags' symbols, ripgrep's candidate files, and source lines."""

from __future__ import annotations

import json
import os
import re
import stat
import time

from ..arguments import check_deadline, file_type, is_within, printable
from ..git_guard import SAFE_GIT_ENV
from ..processes import BoundedCapture, ProcessResult, run_process
from ..protocol import MIN_TIMEOUT, JsonDict, ToolError
from .grep import GREP_STDERR_LIMIT, GREP_STDOUT_LIMIT
from .read import READ_LINE_PROBE_BYTES, open_regular_file, skip_rest_of_line

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..server import ToolServer


LSP_MAX_CANDIDATE_FILES = 200
LSP_MAX_SYMBOLS = 100
LSP_MAX_REFERENCES = 200
LSP_SOURCE_PREVIEW_CHARS = 200
LSP_CANDIDATE_MAX_FILESIZE = "4M"
# ripgrep is stopped after this many files that mention a name (references: matching
# lines), so a name found everywhere costs no more than one found a few thousand times.
LSP_MAX_MENTIONS = 2000
# Fixed-size argv; file lists longer than this are cut rather than hitting ARG_MAX.
LSP_MAX_ARGV_BYTES = 1 << 20
LSP_LANGUAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Python", ("py", "pyi")),
    ("JavaScript/TypeScript", ("js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts")),
    ("Go", ("go",)),
    ("Rust", ("rs",)),
    ("Java", ("java",)),
    ("C/C++", ("c", "h", "cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "h++", "inl")),
)
# Searched when no file gives the language: the families above plus other languages ctags
# parses, and never prose or data files, whose headings ctags would report as symbols.
LSP_SOURCE_EXTENSIONS = (
    *(extension for _, extensions in LSP_LANGUAGES for extension in extensions),
    *("rb", "php", "cs", "kt", "scala", "lua", "pl", "pm", "sh"),
)
# --options=NONE: option files (./.ctags.d in a repository) could redirect the output.
# --links=no: never read through a symlink; --sort=no: sorting would use a temporary file.
CTAGS_ARGV = (
    "ctags", "--options=NONE", "--links=no", "--sort=no", "--output-format=json",
    "--fields=+nKzSe", "--kinds-C=+p", "--kinds-C++=+p", "-f", "-",
)  # fmt: skip
DECLARATION_KINDS = frozenset({"prototype", "externvar"})
IDENTIFIER = re.compile(r"[\w$]+")
QUALIFIER_SEPARATORS = re.compile(r"::|\.|#")


class Symbol:
    """One definition reported by ctags."""

    __slots__ = ("imported", "kind", "line", "name", "path", "scope", "scope_kind", "signature")

    def __init__(self, tag: JsonDict, name: str, path: str, line: int) -> None:
        self.name = name
        self.path = path
        self.line = line
        self.kind = _tag_text(tag, "kind") or "symbol"
        self.scope = _tag_text(tag, "scope")
        self.scope_kind = _tag_text(tag, "scopeKind")
        self.signature = _tag_text(tag, "signature")
        # ctags tags `import x as y` with a nameref; it names the module, not a definition.
        self.imported = "nameref" in tag

    @classmethod
    def from_tag(cls, tag: object) -> Symbol | None:
        if not isinstance(tag, dict) or tag.get("_type") != "tag":
            return None
        name, path, line = tag.get("name"), tag.get("path"), tag.get("line")
        if not isinstance(name, str) or not isinstance(path, str) or not isinstance(line, int):
            return None
        return cls(tag, name, path, line)

    def scope_depth(self) -> int:
        return len(QUALIFIER_SEPARATORS.split(self.scope)) if self.scope else 0

    def in_scope(self, qualifier: str) -> bool:
        """Whether the symbol's scope ends with QUALIFIER (`Greeter` for `Greeter.greet`)."""
        scope = "." + ".".join(QUALIFIER_SEPARATORS.split(self.scope)).lower()
        return not qualifier or scope.endswith("." + qualifier.lower())


def _tag_text(tag: JsonDict, key: str) -> str:
    value = tag.get(key)
    return value if isinstance(value, str) else ""


def lsp_file(server: ToolServer, raw: str) -> str:
    """The file to parse: regular, and not reached through a symlink leaving the workspace."""
    path = server.resolve(raw)
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise ToolError(f"Path is a directory, not a file: {printable(path)}")
    if not stat.S_ISREG(mode):
        raise ToolError(f"Not a regular file ({file_type(mode)}): {printable(path)}")
    if not os.path.islink(path):
        return path
    real = os.path.realpath(path)
    workspace = os.path.realpath(server.workspace)
    if is_within(path, server.workspace) and not is_within(real, workspace):
        raise ToolError(
            f"Refusing to follow a symbolic link out of the workspace: {printable(path)}"
        )
    return real


def workspace_relative(server: ToolServer, path: str) -> str:
    prefix = server.workspace.rstrip("/") + "/"
    return printable(path[len(prefix) :] if path.startswith(prefix) else path)


def language_of(path: str) -> tuple[str, tuple[str, ...]]:
    """The language family of PATH by extension: its name and all its extensions."""
    base = os.path.basename(path)
    extension = base.rpartition(".")[2].lower() if "." in base.lstrip(".") else ""
    if not extension.replace("+", "").replace("_", "").isalnum():
        return "", ()  # a glob character would garble rg's --type-add
    for language, extensions in LSP_LANGUAGES:
        if extension in extensions:
            return language, extensions
    return (f".{extension}", (extension,)) if extension else ("", ())


def format_symbol(server: ToolServer, symbol: Symbol) -> str:
    scope = f" ({symbol.scope_kind} {symbol.scope})".replace("( ", "(") if symbol.scope else ""
    location = f"{workspace_relative(server, symbol.path)}:{symbol.line}"
    return f"{location}: {symbol.kind} {printable(symbol.name)}{printable(scope)}"


def source_previews(
    symbols: list[Symbol], limit: tuple[float, float]
) -> dict[tuple[str, int], str]:
    """The stripped source line of each symbol, read once per file."""
    wanted: dict[str, set[int]] = {}
    for symbol in symbols:
        wanted.setdefault(symbol.path, set()).add(symbol.line)
    previews: dict[tuple[str, int], str] = {}
    for path, numbers in wanted.items():
        try:
            found, _ = source_lines(path, numbers, limit)
        except (OSError, ToolError) as exc:
            if isinstance(exc, ToolError) and exc.timed_out:
                raise
            continue
        for number, text in found.items():
            stripped = text.strip()
            if len(stripped) > LSP_SOURCE_PREVIEW_CHARS:
                stripped = stripped[:LSP_SOURCE_PREVIEW_CHARS] + " ..."
            previews[(path, number)] = printable(stripped)
    return previews


def source_lines(
    path: str, numbers: set[int], limit: tuple[float, float]
) -> tuple[dict[int, str], int]:
    """The wanted lines of PATH (each cut at READ_LINE_PROBE_BYTES) and how many were read."""
    found: dict[int, str] = {}
    last = max(numbers)
    line_no = 0
    with open_regular_file(path) as handle:
        while line_no < last:
            raw = handle.readline(READ_LINE_PROBE_BYTES)
            if not raw:
                break
            line_no += 1
            if len(raw) == READ_LINE_PROBE_BYTES and not raw.endswith(b"\n"):
                skip_rest_of_line(handle, limit[0])
            if line_no & 0xFFF == 0:
                check_deadline(limit[0], "lsp", limit[1])
            if line_no in numbers:
                found[line_no] = raw.decode("utf-8", "replace").rstrip("\r\n")
    return found, line_no


def lsp_rg_argv(
    server: ToolServer, name: str, extensions: tuple[str, ...], *flags: str, root: str = ""
) -> list[str]:
    """A fixed-string ripgrep search for NAME under ROOT (the workspace when empty), limited
    to files with the given extensions."""
    argv = ["rg", "--no-config", "--color", "never", "--hidden", "--fixed-strings", *flags]
    if extensions:
        argv += ["--type-add", f"lsp:*.{{{','.join(extensions)}}}", "--type", "lsp"]
    return [*argv, "--glob", "!.git", "-e", name, "--", root or server.workspace]


def candidate_files(
    server: ToolServer,
    name: str,
    extensions: tuple[str, ...],
    limit: tuple[float, float],
    *flags: str,
    root: str = "",
) -> tuple[list[str], bool]:
    """Files that mention NAME, sorted: the only ones worth handing to ctags; and whether
    the search stopped at LSP_MAX_MENTIONS files (more mention it)."""
    argv = lsp_rg_argv(
        server,
        name,
        extensions,
        "--files-with-matches",
        "--null",
        "--max-filesize",
        LSP_CANDIDATE_MAX_FILESIZE,
        *flags,
        root=root,
    )
    stdout, capture = rg_output(server, argv, limit, b"\0")
    files = sorted(os.fsdecode(path) for path in stdout.split(b"\0") if path)
    return files, capture.stopped


def definition_scopes(server: ToolServer, origin: str | None) -> list[str]:
    """Where a definition is looked for, nearest first: the directory of the file asked
    from, then each one above it up to the workspace (only the workspace without one)."""
    if origin is None or not is_within(origin, server.workspace):
        return [server.workspace]
    workspace = os.path.realpath(server.workspace)
    scopes = []
    directory = os.path.dirname(origin)
    while directory != server.workspace and is_within(directory, server.workspace):
        # ripgrep follows a symlink given as its root: never one that leaves the workspace.
        if is_within(os.path.realpath(directory), workspace):
            scopes.append(directory)
        directory = os.path.dirname(directory)
    return [*scopes, server.workspace]


def rg_output(
    server: ToolServer, argv: list[str], limit: tuple[float, float], separator: bytes
) -> tuple[bytes, BoundedCapture]:
    """rg's output, stopped after LSP_MAX_MENTIONS records ending with SEPARATOR."""
    stop = (LSP_MAX_MENTIONS, separator)
    result = run_lsp_process(server, argv, limit, "ripgrep (rg)", stop)
    stdout = result.stdout.data()
    if not stdout and result.returncode not in (0, 1):
        errors = result.stderr.data().decode("utf-8", "replace").strip().splitlines()
        raise ToolError("rg: " + " / ".join(line.strip() for line in errors[:6] if line.strip()))
    return stdout, result.stdout


def ctags_symbols(server: ToolServer, paths: list[str], limit: tuple[float, float]) -> list[Symbol]:
    """Parse PATHS with ctags and return their definitions; nothing is written to disk."""
    room = LSP_MAX_ARGV_BYTES
    argv = list(CTAGS_ARGV)
    for path in paths:
        room -= len(os.fsencode(path)) + 1
        if room < 0:
            break
        argv.append(path)
    if len(argv) == len(CTAGS_ARGV):
        return []
    result = run_lsp_process(server, argv, limit, "universal-ctags (ctags)")
    symbols = []
    for raw in result.stdout.data().splitlines():
        try:
            symbol = Symbol.from_tag(json.loads(raw.decode("utf-8", "surrogateescape")))
        except ValueError:
            continue
        if symbol is not None:
            symbols.append(symbol)
    if not symbols and result.returncode != 0:
        errors = result.stderr.data().decode("utf-8", "replace").splitlines()
        problems = [line.strip() for line in errors if line.strip() and "Notice:" not in line]
        raise ToolError("ctags: " + " / ".join(problems[:6] or ["failed"]))
    return symbols


def run_lsp_process(
    server: ToolServer,
    argv: list[str],
    limit: tuple[float, float],
    program: str,
    stop_after: tuple[int, bytes] | None = None,
) -> ProcessResult:
    check_deadline(limit[0], "lsp", limit[1])
    try:
        result = run_process(
            server,
            argv,
            timeout=max(MIN_TIMEOUT, limit[0] - time.monotonic()),
            limits=(GREP_STDOUT_LIMIT, GREP_STDERR_LIMIT),
            cwd="/",
            git_env=SAFE_GIT_ENV,
            stop_after=stop_after,
        )
    except FileNotFoundError:
        raise ToolError(f"{program} is not installed in the sandbox") from None
    if result.timed_out:
        raise ToolError(
            f"lsp timed out after {limit[1]:g} s; in a large repository, "
            "use Grep with path= or glob= to look in one part of it",
            timed_out=True,
        )
    return result
