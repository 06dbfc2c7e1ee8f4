"""The judge's verdict file: its JSON schema, and the check of what a model wrote to it
(hostile input: any shape, any size the plan directory holds, any characters)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_EVIDENCE_CHARS",
    "VERDICTS",
    "VERDICT_FILE",
    "StepVerdict",
    "VerdictFileError",
    "parse_verdicts",
    "verdict_schema",
]

VERDICT_FILE = "verdicts.json"
"""The file the judge writes in its plan directory (/plan/verdicts.json)."""
VERDICTS = ("done", "partly", "not done")
MAX_EVIDENCE_CHARS = 300
MAX_PROBLEMS = 8
"""Problems named in the feedback at most; a file wrong everywhere needs no longer list."""
PLAIN_TEXT = "^[^\\u0000-\\u001f\\u007f]*$"
"""One line, no control character (an escape sequence or a line break in the output)."""
FILE_LINE = "[^\\s:]+:[0-9]+"
"""A `file:line` reference, which the evidence of a step done or partly done must hold."""
_PLAIN_TEXT, _FILE_LINE = re.compile(PLAIN_TEXT), re.compile(FILE_LINE)


@dataclass(frozen=True)
class StepVerdict:
    """The judge's answer about one Detailed Step."""

    number: int
    verdict: str
    """One of VERDICTS."""
    evidence: str
    """One line: the file:line that shows it done, or what is missing."""


class VerdictFileError(ValueError):
    """The verdict file is missing or does not follow the schema; one problem a line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems[:MAX_PROBLEMS]
        more = len(problems) - len(self.problems)
        super().__init__("; ".join(self.problems) + (f"; and {more} more" if more else ""))


def verdict_schema(steps: int) -> dict[str, Any]:
    """The JSON schema of a verdict file for a plan of STEPS Detailed Steps (each step
    once: the step numbers are also unique, which JSON schema cannot say)."""
    evidence = {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_EVIDENCE_CHARS,
        "allOf": [{"pattern": PLAIN_TEXT}, {"pattern": "\\S"}],
    }
    step = {
        "type": "object",
        "required": ["step", "verdict", "evidence"],
        "additionalProperties": False,
        "properties": {
            "step": {"type": "integer", "minimum": 1, "maximum": steps},
            "verdict": {"enum": list(VERDICTS)},
            "evidence": evidence,
        },
        "if": {"properties": {"verdict": {"enum": ["done", "partly"]}}},
        "then": {"properties": {"evidence": {"pattern": FILE_LINE}}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["steps"],
        "additionalProperties": False,
        "properties": {
            "steps": {"type": "array", "minItems": steps, "maxItems": steps, "items": step}
        },
    }


def parse_verdicts(text: str | None, steps: int) -> list[StepVerdict]:
    """The verdicts of a verdict file's TEXT (None: there is no file), by step number.

    Raises:
        VerdictFileError: no file, not JSON, or not the schema of verdict_schema(steps).
    """
    if text is None:
        raise VerdictFileError([f"there is no verdict file {VERDICT_FILE}"])
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise VerdictFileError([f"{VERDICT_FILE} is not JSON ({_short(error)})"]) from None
    if not isinstance(document, dict) or set(document) != {"steps"}:
        raise VerdictFileError(['the file must be one object with one key, "steps"'])
    entries = document["steps"]
    if not isinstance(entries, list):
        raise VerdictFileError(['"steps" must be an array'])
    problems: list[str] = []
    if len(entries) != steps:
        problems.append(f'"steps" has {len(entries)} entries; the plan has {steps} steps')
    found: dict[int, StepVerdict] = {}
    for index, entry in enumerate(entries):
        where = f"steps[{index}]"
        entry_problems = _entry_problems(entry, steps, where)
        if entry_problems:
            problems.extend(entry_problems)
            continue
        number = int(entry["step"])  # 2.0 is an integer to JSON schema too
        if number in found:
            problems.append(f"{where}: step {number} is judged twice")
        found[number] = StepVerdict(number, entry["verdict"], entry["evidence"].strip())
    missing = [str(number) for number in range(1, steps + 1) if number not in found]
    if missing and not problems:
        problems.append(f"no verdict for step(s) {', '.join(missing)}")
    if problems:
        raise VerdictFileError(problems)
    return [found[number] for number in range(1, steps + 1)]


def _entry_problems(entry: object, steps: int, where: str) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{where} must be an object"]
    keys = {"step", "verdict", "evidence"}
    problems = [f"{where}: unknown key {_short(key)}" for key in entry if key not in keys]
    problems += [f"{where}: {key!r} is missing" for key in sorted(keys) if key not in entry]
    if "step" in entry and not _is_step(entry["step"], steps):
        problems.append(f"{where}.step must be a step number from 1 to {steps}")
    verdict = entry.get("verdict")
    if "verdict" in entry and verdict not in VERDICTS:
        problems.append(f"{where}.verdict must be one of {', '.join(map(repr, VERDICTS))}")
    evidence = entry.get("evidence")
    if "evidence" in entry:
        problems += _evidence_problems(evidence, verdict, where)
    return problems


def _is_step(number: object, steps: int) -> bool:
    """A step number from 1 to STEPS: an integer (2.0 is one to JSON schema too), no bool."""
    if isinstance(number, bool) or not isinstance(number, int | float):
        return False
    if isinstance(number, float) and not number.is_integer():
        return False
    return 1 <= number <= steps


def _evidence_problems(evidence: object, verdict: object, where: str) -> list[str]:
    if not isinstance(evidence, str) or not evidence.strip():
        return [f"{where}.evidence must be a non-empty string"]
    if len(evidence) > MAX_EVIDENCE_CHARS:
        return [f"{where}.evidence is longer than {MAX_EVIDENCE_CHARS} characters"]
    if not _PLAIN_TEXT.match(evidence):
        return [f"{where}.evidence must be one line, without control characters"]
    if verdict in ("done", "partly") and not _FILE_LINE.search(evidence):
        return [f"{where}.evidence must name the file:line that shows the step {verdict}"]
    return []


def _short(value: object) -> str:
    text = str(value)
    return repr(text[:60] + ("..." if len(text) > 60 else ""))
