"""lsp: definitions, references and symbols without a language server (ctags and ripgrep)."""

from __future__ import annotations

import os
import time

from ..arguments import cap_output, int_arg, opt_str_arg, plural, printable, str_arg
from ..protocol import JsonDict, Outcome, ToolError
from .lsp_index import (
    DECLARATION_KINDS,
    IDENTIFIER,
    LSP_MAX_CANDIDATE_FILES,
    LSP_MAX_REFERENCES,
    LSP_MAX_SYMBOLS,
    LSP_SOURCE_EXTENSIONS,
    QUALIFIER_SEPARATORS,
    Symbol,
    candidate_files,
    ctags_symbols,
    definition_scopes,
    format_symbol,
    language_of,
    lsp_file,
    lsp_rg_argv,
    rg_output,
    source_lines,
    source_previews,
    workspace_relative,
)

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..server import ToolServer


def op_lsp(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    operation = str_arg(args, "operation")
    handler = LSP_OPERATIONS.get(operation)
    if handler is None:
        known = ", ".join(LSP_OPERATIONS)
        raise ToolError(f"Invalid operation {operation!r}: expected one of {known}")
    return handler(server, args, (time.monotonic() + timeout, timeout))


def lsp_document_symbols(server: ToolServer, args: JsonDict, limit: tuple[float, float]) -> Outcome:
    path = lsp_file(server, str_arg(args, "file_path"))
    symbols = ctags_symbols(server, [path], limit)
    if not symbols:
        shown = workspace_relative(server, path)
        message = f"No symbols found in {shown} (language not recognised?)"
        return Outcome(message, meta={"symbols": 0})
    symbols.sort(key=lambda symbol: symbol.line)
    lines = [
        f"{'  ' * symbol.scope_depth()}{symbol.line}: {symbol.kind} "
        f"{printable(symbol.name)}{printable(symbol.signature)}"
        for symbol in symbols
    ]
    text, truncated = cap_output("\n".join(lines))
    return Outcome(text, truncated=truncated, meta={"symbols": len(symbols)})


def lsp_workspace_symbols(
    server: ToolServer, args: JsonDict, limit: tuple[float, float]
) -> Outcome:
    query = symbol_arg(args)
    if query is None:
        raise ToolError("workspace_symbols needs symbol: the name (or part of it) to look for")
    qualifier, name = split_qualified(query)
    symbols, parsed, mentioning = matching_symbols(server, name, qualifier, limit)
    wanted = name.lower()

    def rank(symbol: Symbol) -> tuple[int, str, int]:
        found = symbol.name.lower()
        closeness = (symbol.name != name) + (found != wanted) + (not found.startswith(wanted))
        return closeness, symbol.path, symbol.line

    symbols.sort(key=rank)
    notes = symbol_notes(len(symbols), parsed, mentioning, name)
    if not symbols:
        message = f"No symbols matching {query!r} found in the workspace"
        return Outcome("\n".join([message, *notes]), truncated=bool(notes), meta={"symbols": 0})
    lines = [format_symbol(server, symbol) for symbol in symbols[:LSP_MAX_SYMBOLS]]
    text, truncated = cap_output("\n".join(lines + notes))
    meta: JsonDict = {"symbols": len(symbols), "files_parsed": parsed}
    return Outcome(text, truncated=truncated or bool(notes), meta=meta)


def matching_symbols(
    server: ToolServer, name: str, qualifier: str, limit: tuple[float, float]
) -> tuple[list[Symbol], int, Mentions]:
    """Definitions whose name contains NAME in any case; also how many files were parsed and
    how many mention NAME. Files with NAME as a whole word come first, as ctags is the slow
    part and parses at most LSP_MAX_CANDIDATE_FILES."""
    wanted = name.lower()
    files, stopped = candidate_files(server, name, LSP_SOURCE_EXTENSIONS, limit, "--word-regexp")
    scanned = files[:LSP_MAX_CANDIDATE_FILES]
    symbols = ctags_symbols(server, scanned, limit)
    found = [symbol for symbol in symbols if wanted in symbol.name.lower()]
    if len(found) < LSP_MAX_SYMBOLS and len(scanned) < LSP_MAX_CANDIDATE_FILES and not stopped:
        # Only now pay for the case-insensitive substring search, on files not yet parsed.
        seen = set(files)
        more, stopped = candidate_files(server, name, LSP_SOURCE_EXTENSIONS, limit, "--ignore-case")
        files += [path for path in more if path not in seen]
        extra = files[len(scanned) : LSP_MAX_CANDIDATE_FILES]
        symbols += ctags_symbols(server, extra, limit)
        scanned += extra
    matching = [
        symbol for symbol in symbols if wanted in symbol.name.lower() and symbol.in_scope(qualifier)
    ]
    return matching, len(scanned), Mentions(len(files), stopped)


class Mentions:
    """How many files mention a name, and whether the search stopped there (more do)."""

    __slots__ = ("files", "stopped")

    def __init__(self, files: int, stopped: bool) -> None:
        self.files = files
        self.stopped = stopped


def symbol_notes(found: int, parsed: int, mentioning: Mentions, name: str) -> list[str]:
    """Why an answer may be partial: symbols left out, or files ctags did not parse."""
    notes = []
    if found > LSP_MAX_SYMBOLS:
        notes.append(f"[showing {LSP_MAX_SYMBOLS} of {found} symbols; use a more specific name]")
    if mentioning.stopped or mentioning.files > parsed:
        of = f"more than {mentioning.files}" if mentioning.stopped else f"the {mentioning.files}"
        notes.append(
            f"[parsed {parsed} of {of} files that mention {name!r}; "
            "results may be incomplete: use Grep to search further]"
        )
    return notes


def lsp_definition(server: ToolServer, args: JsonDict, limit: tuple[float, float]) -> Outcome:
    name, qualifier, origin = lsp_target(server, args, "definition", limit)
    symbols, scanned, mentions, scope = find_definitions(server, name, qualifier, origin, limit)
    symbols.sort(
        key=lambda symbol: (
            symbol.path != origin,
            symbol.kind in DECLARATION_KINDS or symbol.imported,
            symbol.path,
            symbol.line,
        )
    )
    meta: JsonDict = {"symbol": name, "definitions": len(symbols), "files_parsed": len(scanned)}
    notes = symbol_notes(len(symbols), len(scanned), mentions, name)
    if scope != server.workspace:
        notes.append(
            f"[looked in {workspace_relative(server, scope)}/ only; to search the whole "
            "repository, ask with symbol and no file_path]"
        )
    if not symbols:
        message = (
            f"No definition found for {name!r} in {plural(len(scanned), 'file')} of the "
            "workspace (it may come from a library, or be a local variable or attribute)"
        )
        return Outcome("\n".join([message, *notes]), truncated=bool(notes), meta=meta)
    shown = symbols[:LSP_MAX_SYMBOLS]
    previews = source_previews(shown, limit)
    lines = [f"{plural(len(symbols), 'definition')} of {printable(name)!r}:"]
    for symbol in shown:
        lines.append(format_symbol(server, symbol))
        preview = previews.get((symbol.path, symbol.line))
        if preview:
            lines.append(f"    {preview}")
    text, truncated = cap_output("\n".join(lines + notes))
    return Outcome(text, truncated=truncated or bool(notes), meta=meta)


def find_definitions(
    server: ToolServer, name: str, qualifier: str, origin: str | None, limit: tuple[float, float]
) -> tuple[list[Symbol], list[str], Mentions, str]:
    """Definitions of NAME, looked for in the directory of the file asked from, then in each
    one above it, stopping at the first where one is (not only an import or a prototype):
    a question about one file reads the part of the repository it is in, and ctags parses
    only files that mention NAME. Also returns the files parsed, the mentions, and the
    directory searched last."""
    extensions = language_of(origin)[1] if origin else LSP_SOURCE_EXTENSIONS
    parsed: dict[str, list[Symbol]] = {}
    symbols: list[Symbol] = []
    scanned: list[str] = []
    mentions = Mentions(0, False)
    scope = server.workspace
    for scope in definition_scopes(server, origin):
        found, stopped = candidate_files(
            server, name, extensions, limit, "--word-regexp", root=scope
        )
        files = list(dict.fromkeys([origin, *found] if origin else found))
        scanned = files[:LSP_MAX_CANDIDATE_FILES]
        fresh = [path for path in scanned if path not in parsed]
        parsed.update((path, []) for path in fresh)
        for symbol in ctags_symbols(server, fresh, limit):
            parsed.setdefault(symbol.path, []).append(symbol)
        symbols = [
            symbol
            for path in scanned
            for symbol in parsed.get(path, [])
            if symbol.name == name and symbol.in_scope(qualifier)
        ]
        mentions = Mentions(len(files), stopped)
        if any(not (s.imported or s.kind in DECLARATION_KINDS) for s in symbols):
            break
    return symbols, scanned, mentions, scope


def lsp_references(server: ToolServer, args: JsonDict, limit: tuple[float, float]) -> Outcome:
    name, _qualifier, origin = lsp_target(server, args, "references", limit)
    language, extensions = language_of(origin) if origin else ("", ())
    flags = ("--word-regexp", "--line-number", "--with-filename", "--no-heading", "--null")
    columns = ("--max-columns", "500", "--max-columns-preview")
    argv = lsp_rg_argv(server, name, extensions, *flags, *columns)
    stdout, capture = rg_output(server, argv, limit, b"\n")
    matches = parse_matches(stdout)
    total = len(matches) + capture.dropped_lines
    at_least = "at least " if capture.stopped else ""
    where = f" ({language} files)" if language else ""
    meta: JsonDict = {"symbol": name, "references": total}
    if not total:
        return Outcome(f"No references to {name!r} found{where}", meta=meta)
    shown = matches[:LSP_MAX_REFERENCES]
    files = list(dict.fromkeys(path for path, _, _ in shown))
    definitions = {
        (symbol.path, symbol.line)
        for symbol in ctags_symbols(server, files, limit)
        if symbol.name == name
    }
    file_count = len({path for path, _, _ in matches})
    lines = [
        f"{at_least}{plural(total, 'reference')} to {name!r} in "
        f"{at_least}{plural(file_count, 'file')}{where}:"
    ]
    for path, number, text in shown:
        mark = " (definition)" if (path, number) in definitions else ""
        location = f"{workspace_relative(server, path)}:{number}"
        lines.append(f"{location}: {printable(text.strip())}{mark}")
    if total > len(shown):
        which = "" if capture.stopped else "the first "
        lines.append(
            f"[showing {which}{len(shown)} of {at_least}{total} references, by path; "
            "use Grep with a path or glob to see the rest]"
        )
    text, truncated = cap_output("\n".join(lines))
    return Outcome(text, truncated=truncated or total > len(shown), meta=meta)


def parse_matches(stdout: bytes) -> list[tuple[str, int, str]]:
    """rg's `path NUL line:text` lines as (path, line, text), sorted by path and line."""
    matches: list[tuple[str, int, str]] = []
    for raw in stdout.splitlines():
        path, _, rest = raw.partition(b"\0")
        number, _, text = rest.partition(b":")
        if number.isdigit():
            matches.append((os.fsdecode(path), int(number), text.decode("utf-8", "replace")))
    matches.sort(key=lambda match: (match[0], match[1]))
    return matches


LSP_OPERATIONS: dict[str, Callable[[ToolServer, JsonDict, tuple[float, float]], Outcome]] = {
    "document_symbols": lsp_document_symbols,
    "workspace_symbols": lsp_workspace_symbols,
    "definition": lsp_definition,
    "references": lsp_references,
}


def symbol_arg(args: JsonDict) -> str | None:
    symbol = opt_str_arg(args, "symbol")
    if symbol is None:
        return None
    symbol = symbol.strip()
    if not symbol or any(char.isspace() or char == "\0" for char in symbol):
        raise ToolError(f"Invalid symbol {symbol!r}: expected a single name such as 'parse_args'")
    return symbol


def split_qualified(symbol: str) -> tuple[str, str]:
    """`Greeter.greet` or `Counter::new` → (qualifier, name); the name is what ctags tags."""
    parts = QUALIFIER_SEPARATORS.split(symbol)
    if not parts[-1]:
        raise ToolError(f"Invalid symbol {symbol!r}: it ends with a separator")
    return ".".join(part for part in parts[:-1] if part), parts[-1]


def lsp_target(
    server: ToolServer, args: JsonDict, operation: str, limit: tuple[float, float]
) -> tuple[str, str, str | None]:
    """The name to look up (from symbol, else from file_path:line:character), its qualifier,
    and the file the question was asked from, if any."""
    raw_path = opt_str_arg(args, "file_path")
    origin = lsp_file(server, raw_path) if raw_path else None
    symbol = symbol_arg(args)
    if symbol is not None:
        qualifier, name = split_qualified(symbol)
        return name, qualifier, origin
    line = int_arg(args, "line", 0, minimum=1)
    character = int_arg(args, "character", 0, minimum=1)
    if origin is None or not line or not character:
        raise ToolError(
            f"{operation} needs file_path, line and character (1-based, as shown by Read), "
            "or symbol"
        )
    return identifier_at(server, origin, line, character, limit), "", origin


def identifier_at(
    server: ToolServer, path: str, line: int, character: int, limit: tuple[float, float]
) -> str:
    """The identifier under a 1-based position; a cursor just after one counts as on it."""
    found, lines_read = source_lines(path, {line}, limit)
    shown = workspace_relative(server, path)
    if line not in found:
        raise ToolError(f"Line {line} is out of range: {shown} has {plural(lines_read, 'line')}")
    text = found[line]
    if character > len(text) + 1:
        raise ToolError(
            f"Character {character} is out of range: line {line} of {shown} "
            f"has {plural(len(text), 'character')}"
        )
    index = character - 1
    spans = [match for match in IDENTIFIER.finditer(text) if match.start() <= index <= match.end()]
    inside = [match for match in spans if index < match.end()]
    word = (inside or spans)[0].group() if spans else ""
    if not word or word[0].isdigit():
        near = text[max(0, index - 10) : index + 10].strip()
        raise ToolError(
            f"No identifier at {shown}:{line}:{character} (the text there is {near!r}); "
            "point at a name, or pass symbol"
        )
    return word
