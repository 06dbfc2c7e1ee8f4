"""Tab completion of `@path` in the terminal's prompt: the repository's paths (from the
session's PathIndex), a directory level at a time, then any path whose name holds what
was typed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from sandbox_runner.session.path_index import PathIndex

MAX_COMPLETIONS = 50
"""Completions offered at once."""
# The mention being typed: `@`, at the start or after a space or bracket, up to the cursor.
TYPING = re.compile(r'(?:^|(?<=[\s(\[{]))@("?)([^\s"`]*)$')


def path_candidates(paths: Iterable[str], typed: str, limit: int = MAX_COMPLETIONS) -> list[str]:
    """What `@TYPED` completes to: the paths that start with it, cut after the next `/`
    (so `@sr` offers `src/`, not every file below it); when none, the paths whose last
    name holds it, in any case."""
    found: dict[str, None] = {}
    for path in paths:
        if path.startswith(typed) and path != typed:
            slash = path.find("/", len(typed))
            found.setdefault(path if slash < 0 else path[: slash + 1])
            if len(found) >= limit:
                break
    if found or not typed:
        return list(found)
    folded = typed.casefold()
    for path in paths:
        if folded in path.rstrip("/").rpartition("/")[2].casefold():
            found.setdefault(path)
            if len(found) >= limit:
                break
    return list(found)


class MentionCompleter(Completer):
    """Completes the `@path` under the cursor from the repository's paths."""

    def __init__(self, index: PathIndex) -> None:
        self.index = index

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        match = TYPING.search(document.text_before_cursor)
        if match is None:
            return
        quote, typed = match.group(1), match.group(2)
        walked = self.index.paths()
        found = path_candidates(walked.paths, typed)
        if not found and not walked.complete:
            # A huge tree: the walk was cut before it got there; list that directory now.
            found = path_candidates(self.index.directory(typed.rpartition("/")[0]), typed)
        for path in found:
            text = f'"{path}"' if quote or " " in path else path
            yield Completion(
                text,
                start_position=-(len(quote) + len(typed)),
                display=path,
                display_meta="directory" if path.endswith("/") else "",
            )
