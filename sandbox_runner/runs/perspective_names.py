"""Perspective names a user most likely misspelt: a name one or two letters away from a
preset or a configured perspective is a usage error, found before anything is paid for."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from sandbox_runner.catalog import CUSTOM_PERSPECTIVE
from sandbox_runner.errors import ConfigError


def check_perspective_names(
    names: Sequence[str], presets: Mapping[str, Sequence[str]], builtins: Collection[str] = ()
) -> None:
    """Refuse a name that is not a preset or a known perspective but looks like one.

    Known are the presets' names, the perspectives they list, and BUILTINS (the
    perspectives planrun describes itself, matched as their prompt matches them: letter
    case, `_` and spaces aside). A name written with the `custom:` prefix is meant as
    written and never refused.

    Raises:
        ConfigError: a name is close to a known one, naming it and the prefix.
    """
    known = {*presets, *(member for members in presets.values() for member in members)}
    known |= set(builtins)
    for name in names:
        if name.startswith(CUSTOM_PERSPECTIVE) or name in known:
            continue
        if "-".join(name.casefold().replace("_", " ").split()) in builtins:
            continue
        meant = likely_meant(name, known)
        if meant is not None:
            raise ConfigError(
                f"perspective {name!r} is not a preset or a known perspective: did you mean "
                f"{meant!r}? (to plan from a new perspective of that name, write "
                f"{CUSTOM_PERSPECTIVE}{name})"
            )


def likely_meant(name: str, known: set[str]) -> str | None:
    """The known name NAME most likely misspells: the same but for letter case, or at most
    one edit away (two for names of eight letters or more); None when none is that close."""
    folded = name.casefold()
    allowed = 2 if len(folded) >= 8 else 1
    best: tuple[int, str] | None = None
    for candidate in sorted(known):
        distance = edit_distance(folded, candidate.casefold())
        if distance <= allowed and (best is None or distance < best[0]):
            best = (distance, candidate)
    return best[1] if best is not None else None


def edit_distance(first: str, second: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours that turn FIRST into
    SECOND (the optimal string alignment distance)."""
    rows = [list(range(len(second) + 1))]
    for i, a in enumerate(first, 1):
        row = [i]
        for j, b in enumerate(second, 1):
            cost = 0 if a == b else 1
            row.append(min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + cost))
            if i > 1 and j > 1 and a == second[j - 2] and first[i - 2] == b:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]
