"""The judge's part of verify's output: lines for people, the `judge` object of `--json`
(its schema in docs/verify.md), and whether it counts as drift. Both say that the
verdicts come from a model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox_runner.safe_text import one_line
from sandbox_runner.spend import usd
from sandbox_runner.verify.check import Verdict
from sandbox_runner.verify.judge_run import JudgeResult
from sandbox_runner.verify.report import EXIT_DRIFT, exit_code
from sandbox_runner.verify.verdict_file import VERDICTS

__all__ = ["MODEL_NOTE", "add_judge", "judge_drift", "judge_json", "judge_lines", "overall_exit"]

MODEL_NOTE = "these verdicts come from a model, not from the checks above"
NOT_DONE = "not done"


def judge_drift(result: JudgeResult, *, strict: bool) -> bool:
    """Whether the judge makes the change drift: under --strict, a step it judged not
    done. An unavailable verdict never does (the checks above decide alone)."""
    return strict and any(step.verdict == NOT_DONE for step in result.verdicts)


def overall_exit(verdict: Verdict, result: JudgeResult | None, *, strict: bool) -> int:
    """verify's exit status: the checks', made drift by the judge's verdicts under --strict."""
    if result is not None and judge_drift(result, strict=strict):
        return EXIT_DRIFT
    return exit_code(verdict)


def judge_lines(result: JudgeResult, *, strict: bool) -> list[str]:
    """The judge's lines: who judged and what it cost, a line per step, a summary; every
    line starts with `judge:` and is inert (the evidence is the model's text)."""
    cost = usd(result.cost_usd) if result.cost_usd is not None else "cost unknown"
    spent = f"{cost}, {result.usage.total:,} tokens, {result.turns} turn(s)"
    if not result.available:
        lines = [
            f"judge: unavailable (model {result.model}; {spent}): {result.reason}",
            "judge: the exit status comes from the checks above alone",
        ]
    else:
        lines = [f"judge: {MODEL_NOTE} (model {result.model}; {spent})"]
        lines += [
            f"judge: step {step.number}: {step.verdict}: {step.evidence}"
            for step in result.verdicts
        ]
        counts = _counts(result)
        tally = ", ".join(f"{counts[verdict]} {verdict}" for verdict in VERDICTS)
        if judge_drift(result, strict=strict):
            effect = "a step not done is drift under --strict: the change drifts"
        elif strict:
            effect = "no step is judged not done"
        else:
            effect = "advisory: without --strict the verdicts do not change the exit status"
        lines.append(f"judge: {tally} of {len(result.verdicts)} step(s); {effect}")
    if result.transcript is not None:
        lines.append(f"judge: transcript: {result.transcript}")
    return [one_line(line) for line in lines]


def judge_json(result: JudgeResult, step_texts: Sequence[str], *, strict: bool) -> dict[str, Any]:
    """The `judge` object of `--json`."""
    usage = result.usage
    return {
        "source": "model",
        "note": MODEL_NOTE.capitalize(),
        "model": result.model,
        "status": "judged" if result.available else "unavailable",
        "reason": result.reason or None,
        "retried": result.retried,
        "drift": judge_drift(result, strict=strict),
        "steps": [
            {
                "number": step.number,
                "text": step_texts[step.number - 1] if step.number <= len(step_texts) else "",
                "verdict": step.verdict,
                "evidence": step.evidence,
            }
            for step in result.verdicts
        ],
        "counts": _counts(result),
        "cost_usd": result.cost_usd,
        "tokens": {
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "cache_creation": usage.cache_creation_input_tokens,
            "cache_read": usage.cache_read_input_tokens,
        },
        "turns": result.turns,
        "wall_seconds": result.wall_seconds,
        "transcript": str(result.transcript) if result.transcript else None,
    }


def add_judge(
    document: dict[str, Any], result: JudgeResult, step_texts: Sequence[str], *, strict: bool
) -> dict[str, Any]:
    """The `--json` document of the checks, with the judge's object added, and its verdict
    and exit code made drift when the judge's verdicts are."""
    judged = {**document, "judge": judge_json(result, step_texts, strict=strict)}
    if judge_drift(result, strict=strict):
        judged["verdict"], judged["exit_code"] = "drift", EXIT_DRIFT
    return judged


def _counts(result: JudgeResult) -> dict[str, int]:
    return {
        verdict: sum(1 for step in result.verdicts if step.verdict == verdict)
        for verdict in VERDICTS
    }
