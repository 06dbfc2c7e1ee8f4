"""The verdict: a change held to its plan, as reasons (drift or warning), each with its file."""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field

from sandbox_runner.verify.changes import Change
from sandbox_runner.verify.plan_refs import PlanRefs, covers

__all__ = ["NEVER_IGNORED", "Reason", "Verdict", "ignored_by", "judge"]

NEVER_IGNORED = ".planrun/"
"""planrun's own project files are checked whatever the globs: a change that widens
`verify.ignore` in the repository's config is itself a change the plan must name."""
STRICT_KINDS = frozenset(
    {
        "critical_file_untouched",
        "step_unmatched",
        "test_file_untouched",
        "head_moved",
        "base_commit_unknown",
    }
)
"""Warnings that `--strict` makes drift; `unnamed_file` is always drift, and
`no_base_commit`, `base_moved_on` and `nothing_changed` are never."""


@dataclass(frozen=True)
class Reason:
    """One finding: its kind, the file (or commit) it is about, and whether it is drift."""

    kind: str
    subject: str
    message: str
    drift: bool

    def line(self) -> str:
        """The finding on one line, for the terminal."""
        return f"{'drift' if self.drift else 'warning'}: {self.subject}: {self.message}"


@dataclass
class Verdict:
    """Everything verify found; `drift` decides the exit status."""

    changed: list[str]
    """Changed paths that no ignore glob matches."""
    ignored: list[str]
    unnamed: list[str]
    """Changed paths the plan never names."""
    critical: dict[str, bool]
    """Each critical file, and whether the change touched it."""
    steps: list[tuple[str, tuple[str, ...], bool | None]]
    """Each Detailed Step: its text, the files it names, whether one changed (None: it
    names none)."""
    tests: dict[str, bool]
    """Each test file of the Test Plan, and whether it was added or changed."""
    reasons: list[Reason] = field(default_factory=list)

    @property
    def drift(self) -> bool:
        return any(reason.drift for reason in self.reasons)


def ignored_by(path: str, globs: tuple[str, ...]) -> bool:
    """Whether a glob matches the path or its file name (`*.lock` matches `a/poetry.lock`)."""
    if path.startswith(NEVER_IGNORED):
        return False
    name = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(name, glob) for glob in globs)


def judge(plan: PlanRefs, change: Change, ignore: tuple[str, ...], *, strict: bool) -> Verdict:
    """Hold the change to the plan; `strict` makes the warnings of STRICT_KINDS drift."""
    changed = [path for path in change.files if not ignored_by(path, ignore)]
    ignored = [path for path in change.files if ignored_by(path, ignore)]

    def touched(mention: str) -> bool:
        return any(covers(mention, path) for path in changed)

    verdict = Verdict(
        changed=changed,
        ignored=ignored,
        unnamed=[p for p in changed if not any(covers(m, p) for m in plan.mentioned)],
        critical={path: touched(path) for path in plan.critical_files},
        steps=[
            (step.text, step.paths, any(map(touched, step.paths)) if step.paths else None)
            for step in plan.steps
        ],
        tests={path: touched(path) for path in plan.test_files},
    )
    found = [
        ("unnamed_file", path, "changed, but the plan never names it") for path in verdict.unnamed
    ]
    found += [
        ("critical_file_untouched", path, "a critical file of the plan, not changed")
        for path, done in verdict.critical.items()
        if not done
    ]
    found += [
        ("step_unmatched", ", ".join(paths), f"step {number} has no matching change ({text})")
        for number, (text, paths, matched) in enumerate(verdict.steps, 1)
        if matched is False
    ]
    found += [
        ("test_file_untouched", path, "named by the Test Plan, not added or changed")
        for path, done in verdict.tests.items()
        if not done
    ]
    found += _base_reasons(change, plan)
    if not change.files:
        found.append(("nothing_changed", change.head[:12], "no file changed"))
    verdict.reasons = [
        Reason(kind, subject, message, kind == "unnamed_file" or (strict and kind in STRICT_KINDS))
        for kind, subject, message in found
    ]
    return verdict


def _base_reasons(change: Change, plan: PlanRefs) -> list[tuple[str, str, str]]:
    check = change.base_check
    if check.plan_commit is None:
        return [("no_base_commit", "plan", "the plan does not record its base commit")]
    plan_commit, start = check.plan_commit[:12], (change.base_commit or change.head)[:12]
    if not check.known:
        message = "the plan's base commit is not in this repository (fetch its history?)"
        return [("base_commit_unknown", plan_commit, message)]
    if not check.moved:
        return []
    if not check.in_history:
        message = f"the plan's base commit is not in HEAD's history (HEAD is {change.head[:12]})"
        return [("head_moved", plan_commit, message)]
    if change.base_rev is None:
        message = (
            f"HEAD moved since the plan was written (HEAD is {start}); "
            f"compare from there with --base {plan_commit}"
        )
        return [("head_moved", plan_commit, message)]
    # The base branch moving on matters only where it changed what the plan is about.
    stale = [p for p in check.moved_files if any(covers(m, p) for m in plan.mentioned)]
    return [
        (
            "base_moved_on",
            path,
            f"changed on the base since the plan was written (at {plan_commit})",
        )
        for path in stale
    ]
