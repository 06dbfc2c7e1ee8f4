"""Writes the demo's cassettes: two scripted Plan conversations for examples/demo-repo, and
the Synthesis conversation that merges their plans into the recommended plan.

The demo has to run without an API key, so its "model" is a cassette played back by
`planrun plan --replay`. These conversations were written by hand (no model was called)
in the shape a real run records with `--record`: each Plan model explores with Glob, Read,
Grep and git, tries one command plan mode refuses, writes its plan file and stops; the
Synthesis model checks the claims the plans disagree on, writes recommended.md and stops.

    python examples/make_demo_cassettes.py   # rewrites examples/cassettes/due-dates/
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "cassettes" / "due-dates"

SIMPLICITY_PLAN = """# Due dates and an overdue filter for todo

## Understanding
Tasks get an optional due date (`todo add "title" --due 2026-12-01`), and
`todo list --overdue` shows only open tasks whose due date is before today. Task files
written by older versions, which have no `due` key, must keep loading.

## Constraints
- The JSON file format stays backwards compatible: `due` is optional.
- No new dependencies; dates are ISO `YYYY-MM-DD` parsed with `datetime.date.fromisoformat`.
- The existing commands and their output do not change.

## Assumptions
- "Overdue" compares against the local date (`date.today()`); a task due today is not overdue.
- Task files are small (hundreds of tasks), so loading the whole file stays fine.

## Approach
Add one optional field to `Task`, one argument to `add`, one flag to `list`. Keep the
filtering in the CLI layer as a one-line comprehension; no new modules, no index.

## Detailed Steps
1. `todo/models.py`: add `due: str | None = None` to `Task`; `from_dict` already passes
   keys through, so old files (no `due`) load with `due=None`. Add
   `is_overdue(today: date) -> bool` (`not done and due is not None and date.fromisoformat(due) < today`).
2. `todo/store.py`: give `TaskStore.add` a `due: str | None = None` parameter and pass it
   to `Task`.
3. `todo/cli.py`: `add --due` validated with `date.fromisoformat` (argparse `type=`), so a
   bad date is a usage error; `list --overdue` filters with `task.is_overdue(date.today())`
   and shows the due date in the listing when there is one.
4. `README.md`: document both options.

## Test Plan
- `tests/test_store.py`: a task with a due date round-trips; a file without `due` loads.
- A new `tests/test_models.py` for `is_overdue` (past, today, future, done, no date).
- `python -m pytest` from the repository root.

## Risks
- Time zones: `date.today()` is local; a task could flip to overdue at local midnight. Acceptable for a personal list.
- A malformed `due` written by hand into the file would raise on `--overdue`; catch `ValueError` and skip it with a warning.

## Alternatives Considered
- Storing a full timestamp: more precision than a to-do list needs, and harder to type.
- A separate index of due dates: unnecessary at this size (see the performance plan).

## Rollback and Mitigations
The field is optional and additive: reverting the commit leaves files with a `due` key,
which the old `Task(**data)` would reject, so a rollback must also drop unknown keys in
`from_dict` (a one-line change worth making now).

## Success Criteria
- `todo add "x" --due 2020-01-01 && todo list --overdue` shows the task.
- An old task file lists unchanged; all tests pass.

## Next Actions
- Implement steps 1-3 and the tests.
- Run `pip install -e .` and `python -m pytest` (not run here: plan mode is read-only).

### Critical Files for Implementation
- todo/models.py - gains the optional `due` field and `is_overdue`
- todo/cli.py - the `--due` argument and the `--overdue` filter
- todo/store.py - `add` passes the due date through
- tests/test_store.py - round-trip and backwards-compatibility tests
"""

PERFORMANCE_PLAN = """# Due dates with a fast overdue query

## Understanding
Add optional due dates and `todo list --overdue`, and keep every command fast as the
task file grows: today each command reads and rewrites the whole JSON file.

## Constraints
- Backwards compatible file format; no new runtime dependencies.
- `list --overdue` must not get slower than `list` itself.

## Assumptions
- Lists may grow to tens of thousands of tasks (imported from other tools).
- Reads are far more frequent than writes.

## Approach
Store `due` as an ISO date string (it sorts lexicographically), parse each date once at
load, and answer `--overdue` with a single pass comparing strings against
`date.today().isoformat()`, so no per-task `datetime` parsing happens on the hot path.
Keep the file format; add a streaming save that writes to a temporary file and renames.

## Detailed Steps
1. `todo/models.py`: `due: str | None = None`; validate the format once in `from_dict`.
2. `todo/store.py`: `load()` keeps a cached list keyed by file mtime, so one command that
   calls `load()` twice (`add`, `complete`) reads the file once; `save()` writes to
   `path.with_suffix(".tmp")` then `os.replace`, which also makes saves atomic.
3. `todo/store.py`: `overdue(today: str) -> list[Task]` does one pass with string
   comparison: `not t.done and t.due is not None and t.due < today`.
4. `todo/cli.py`: `add --due`, `list --overdue` calling `store.overdue(date.today().isoformat())`.
5. Benchmark: a script generating 50,000 tasks; time `list` and `list --overdue` before and after.

## Test Plan
- Tests for `overdue()` (ordering by string equals ordering by date for ISO dates).
- Atomic save: a failing write leaves the old file intact.
- Old files without `due` still load.

## Risks
- The mtime cache could serve stale data if two processes write within the mtime granularity; invalidate on size change too.
- String comparison requires strictly `YYYY-MM-DD`; validate on input and on load.

## Alternatives Considered
- SQLite: the right tool beyond ~100k tasks, but a format migration for a feature that does not need it.
- A sorted index file of due dates: a second file to keep consistent; the single pass is already O(n) with a tiny constant.

## Rollback and Mitigations
Additive field; the atomic save is independent and can be reverted on its own.

## Success Criteria
- `list --overdue` on 50,000 tasks within 10 % of `list`.
- No partially written task file after a crash during save.

## Next Actions
- Write the benchmark first to get a baseline.
- Run `python -m pytest` and the benchmark (not run here: plan mode is read-only).

### Critical Files for Implementation
- todo/store.py - load cache, atomic save and the `overdue` query
- todo/models.py - the `due` field and its validation
- todo/cli.py - the new options
- tests/test_store.py - tests for overdue and atomic saves
"""


RECOMMENDED_PLAN = """# Due dates, an overdue filter and atomic saves for todo

## Understanding
Tasks get an optional due date (`todo add "title" --due 2026-12-01`) and
`todo list --overdue` shows only the open tasks whose due date is before today. Task
files written by older versions, without a `due` key, must keep loading.

## Constraints
- The JSON file format stays backwards compatible: `due` is optional.
- No new dependencies; dates are ISO `YYYY-MM-DD`.
- The existing commands and their output do not change.

## Assumptions
- "Overdue" compares against the local date; a task due today is not overdue.
- Lists stay in the hundreds of tasks; the performance plan's tens of thousands are
  possible but unmeasured, so the design keeps the fast path without a cache.

## Approach
Add one optional field to `Task`, one argument to `add` and one flag to `list`, as the
simplicity plan does; answer `--overdue` in one pass comparing ISO strings, and make
`save()` atomic, both from the performance plan, because they cost a few lines each.

## Decisions
- `due: str | None = None` on `Task`, validated with `date.fromisoformat` at input (simplicity; performance agrees)
- The overdue filter compares ISO strings in one pass, no per-task date parsing (performance)
- The filter lives in `TaskStore.overdue(today)`, not in the CLI, so it is testable without argparse (performance)
- `save()` writes a temporary file and renames it (performance)
- No mtime cache of `load()` (simplicity)
- `from_dict` drops unknown keys, so a rollback can read files that have `due` (simplicity)

## Conflicts
- Caching `load()`: performance adds an mtime-keyed cache, simplicity none; no cache: `store.py` reads the file once per command today, and the cache's staleness risk buys nothing at this size
- Where the filter lives: simplicity filters in `cli.py`, performance in `store.py`; `store.py`, which keeps `cli.py` thin and gives the tests a plain function
- Benchmarking first: performance wants a 50,000-task benchmark before any change; deferred to Next Actions, as no requirement asks for speed

## Detailed Steps
1. `todo/models.py`: add `due: str | None = None`; make `from_dict` keep only known
   fields; add `is_overdue(today: str) -> bool` (`not done and due is not None and due < today`).
2. `todo/store.py`: `add(title, due=None)`; `overdue(today: str) -> list[Task]`; `save()`
   writes `path.with_suffix(".tmp")` and `os.replace`s it over the file.
3. `todo/cli.py`: `add --due` with `type=date.fromisoformat` (a bad date is a usage
   error, stored as `isoformat()`), `list --overdue` calling `store.overdue(date.today().isoformat())`.
4. `README.md`: document both options.

## Test Plan
- `tests/test_store.py`: a due date round-trips; a file without `due` loads; a file with
  an unknown key loads; `overdue()` for past, today, future, done and no date.
- Atomic save: a failing write leaves the old file intact.
- `python -m pytest` from the repository root.

## Risks
- A hand-edited, malformed `due` breaks the string comparison; `from_dict` validates it and drops a bad value with a warning.
- Local midnight flips tasks to overdue; acceptable for a personal list.

## Alternatives Considered
- The performance plan's mtime cache and the 50,000-task benchmark: deferred (see Conflicts).
- SQLite or a due-date index: a migration for a need nobody has yet.

## Rollback and Mitigations
Every change is additive. Because `from_dict` now ignores unknown keys, reverting the
feature still reads files that have `due`; the atomic save can be reverted on its own.

## Success Criteria
- `todo add "x" --due 2020-01-01 && todo list --overdue` shows the task; a done task does not.
- An old task file lists unchanged; all tests pass.

## Next Actions
- Implement steps 1-3 with their tests.
- Run `pip install -e .` and `python -m pytest` (not run here: plan mode is read-only).
- If lists grow past thousands of tasks, write the performance plan's benchmark first.

### Critical Files for Implementation
- todo/models.py - the optional `due` field, `is_overdue` and tolerant `from_dict`
- todo/store.py - `add(due=...)`, the `overdue` query and the atomic save
- todo/cli.py - the `--due` and `--overdue` options
- tests/test_store.py - round trip, old files, overdue and atomic-save tests
"""


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def turn(
    *blocks: dict[str, Any], output_tokens: int = 180, input_tokens: int = 2400
) -> dict[str, Any]:
    stop = "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"
    return {
        "request": None,
        "response": {
            "content": list(blocks),
            "stop_reason": stop,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 3100,
            },
            "model": "claude-sonnet-4-6",
        },
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def conversation(
    prefix: str, plan: str, focus: str, extra: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    return [
        turn(
            text(f"I'll start by mapping the project ({focus})."),
            tool_use(f"{prefix}_1", "Glob", {"pattern": "**/*.py"}),
        ),
        turn(
            tool_use(f"{prefix}_2", "Read", {"file_path": "todo/models.py"}),
            tool_use(f"{prefix}_3", "Read", {"file_path": "todo/store.py"}),
        ),
        turn(
            tool_use(f"{prefix}_4", "Read", {"file_path": "todo/cli.py"}),
            tool_use(
                f"{prefix}_5", "Grep", {"pattern": "from_dict|to_dict", "output_mode": "content"}
            ),
        ),
        *extra,
        turn(
            text("Before writing the plan I'd like to run the tests to see the baseline."),
            tool_use(f"{prefix}_8", "Bash", {"command": "pip install -e . && python -m pytest -q"}),
        ),
        turn(
            text("Plan mode refuses that, so the command goes into Next Actions."),
            tool_use(f"{prefix}_9", "Write", {"file_path": f"/plan/{prefix}.md", "content": plan}),
            output_tokens=1900,
        ),
        turn(text(f"The plan is in /plan/{prefix}.md."), output_tokens=40),
    ]


def synthesis() -> list[dict[str, Any]]:
    """The Synthesis agent: it checks the facts the plans disagree on, then writes one plan."""
    return [
        turn(
            text(
                "The plans agree on the field and the options; they differ on caching, where "
                "the filter lives and atomic saves. I'll check how the store reads and writes."
            ),
            tool_use("recommended_1", "Read", {"file_path": "todo/store.py"}),
            input_tokens=5200,
        ),
        turn(
            tool_use(
                "recommended_2",
                "Grep",
                {
                    "pattern": "load\\(|save\\(",
                    "path": "todo",
                    "output_mode": "content",
                    "-n": True,
                },
            ),
            tool_use("recommended_3", "Read", {"file_path": "tests/test_store.py"}),
        ),
        turn(
            text(
                "Each command calls load() once, so the cache buys nothing; save() rewrites "
                "the file in place, so the atomic save is worth keeping."
            ),
            tool_use(
                "recommended_4",
                "Write",
                {"file_path": "/plan/recommended.md", "content": RECOMMENDED_PLAN},
            ),
            output_tokens=2300,
        ),
        turn(text("The recommended plan is in /plan/recommended.md."), output_tokens=30),
    ]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    cassettes = {
        "simplicity": conversation(
            "simplicity",
            SIMPLICITY_PLAN,
            "simplicity first",
            [
                turn(
                    tool_use("simplicity_6", "Read", {"file_path": "tests/test_store.py"}),
                    tool_use(
                        "simplicity_7",
                        "Bash",
                        {"command": "git log --oneline -5 2>/dev/null || ls"},
                    ),
                ),
            ],
        ),
        "performance": conversation(
            "performance",
            PERFORMANCE_PLAN,
            "looking for hot paths",
            [
                turn(
                    tool_use("performance_6", "LSP", {"operation": "references", "symbol": "load"}),
                    tool_use(
                        "performance_7",
                        "Grep",
                        {"pattern": "json\\.(loads|dumps)", "output_mode": "count"},
                    ),
                ),
            ],
        ),
        "recommended": synthesis(),
    }
    for key, exchanges in cassettes.items():
        header = {
            "cassette": 1,
            "model": "claude-sonnet-4-6",
            "recorded_at": "2026-11-23T00:00:00Z",
            "note": "written by examples/make_demo_cassettes.py, not recorded from a model",
        }
        lines = [json.dumps(header)] + [json.dumps(exchange) for exchange in exchanges]
        (OUT / f"{key}.jsonl").write_text("\n".join(lines) + "\n")
        print(f"wrote {OUT / f'{key}.jsonl'} ({len(exchanges)} exchanges)")


if __name__ == "__main__":
    main()
