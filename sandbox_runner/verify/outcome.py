"""Everything one `planrun verify` found (the checks' verdict, and the judge's when it
ran), and how it is shown: lines, the `--json` document, the exit status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runner.verify.changes import Change
from sandbox_runner.verify.check import Verdict
from sandbox_runner.verify.judge_report import add_judge, judge_lines, overall_exit
from sandbox_runner.verify.judge_run import JudgeResult
from sandbox_runner.verify.plan_refs import PlanRefs
from sandbox_runner.verify.report import report_json, report_lines

__all__ = ["Verification"]


@dataclass(frozen=True)
class Verification:
    """A change held to its plan: what was compared, and what the checks and the judge said."""

    plan_path: Path
    workspace: Path
    refs: PlanRefs
    change: Change
    verdict: Verdict
    ignore: tuple[str, ...]
    """The ignore globs in force."""
    strict: bool
    judged: JudgeResult | None = None
    """The judge's answer (None: --judge was not given)."""

    def lines(self) -> list[str]:
        """The findings for a terminal: the checks' lines, then the judge's."""
        lines = report_lines(self.plan_path, self.change, self.verdict)
        if self.judged is not None:
            lines += judge_lines(self.judged, strict=self.strict)
        return lines

    def document(self) -> dict[str, Any]:
        """The `--json` document."""
        document = report_json(
            self.plan_path, self.workspace, self.refs, self.change, self.verdict,
            strict=self.strict, ignore=self.ignore,
        )  # fmt: skip
        if self.judged is None:
            return document
        texts = [step.text for step in self.refs.steps]
        return add_judge(document, self.judged, texts, strict=self.strict)

    def exit_code(self) -> int:
        """0 when the change follows the plan, 1 when it drifts (the judge's "not done"
        counting under --strict)."""
        return overall_exit(self.verdict, self.judged, strict=self.strict)
