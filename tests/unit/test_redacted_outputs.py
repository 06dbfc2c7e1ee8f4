"""A credential a model read or wrote reaches no file of a run: transcripts, plans, reports
and a batch's summary hold `[REDACTED:<kind>]` in its place."""

from __future__ import annotations

import json
from pathlib import Path

from sandbox_runner.batch.ledger import LedgerRecord
from sandbox_runner.batch.summary import JobRow, summary_document, write_summary
from sandbox_runner.runs.multi import PlanRunSpec, execute
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say, use
from tests.unit.test_plan_loop import VALID_PLAN

GITHUB = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
BASIC = "eC1hY2Nlc3MtdG9rZW46Z2hzX2V4dHJhaGVhZGVy"
CHECKOUT_CONFIG = f"""[core]
\trepositoryformatversion = 0
[remote "origin"]
\turl = https://github.com/org/proj
[http "https://github.com/"]
\textraheader = AUTHORIZATION: basic {BASIC}
"""


def every_file(root: Path) -> dict[Path, str]:
    return {path: path.read_text() for path in root.rglob("*") if path.is_file()}


def test_a_token_a_tool_read_and_one_in_the_plan_reach_no_file_of_the_run(
    sample_repo: Path, tmp_path: Path
) -> None:
    # actions/checkout without persist-credentials: false leaves this in .git/config.
    (sample_repo / ".git").mkdir()
    (sample_repo / ".git" / "config").write_text(CHECKOUT_CONFIG)
    plan = VALID_PLAN.replace("Noisy output.", f"Noisy output; the CI token {GITHUB} leaks.")
    model = ScriptedModel(
        [
            reply(use("Bash", {"command": "cat .git/config"})),
            reply(use("Write", {"file_path": "/plan/simplicity.md", "content": plan})),
            reply(say(f"Done; the checkout sends AUTHORIZATION: basic {BASIC}")),
        ]
    )
    spec = PlanRunSpec(
        requirements="Add a --verbose flag",
        workspace=sample_repo,
        perspectives=["simplicity"],
        model_id="claude-sonnet-4-6",
    )
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    sandboxes: list[LocalSandbox] = []

    def sandbox_factory(plan_dir: Path | None) -> LocalSandbox:
        sandboxes.append(LocalSandbox(sample_repo, plan_dir))
        return sandboxes[-1]

    try:
        outcome = execute(
            spec,
            out_dir,
            model_factory=lambda label: model,
            sandbox_factory=sandbox_factory,
        )
    finally:
        for sandbox in sandboxes:
            sandbox.stop()
    [result] = outcome.record.results
    assert result.valid, result.to_dict()
    # The tool really read the token, and the plan really held one.
    assert BASIC in model.requests[1].messages[-1]["content"][0]["content"]
    files = every_file(out_dir)
    names = {path.relative_to(out_dir).as_posix() for path in files}
    assert {"simplicity.transcript.jsonl", "simplicity.md", "report.md", "report.json"} <= names
    assert "report.html" in names and ".sandbox/simplicity/simplicity.md" in names
    for path, text in files.items():
        assert GITHUB not in text and BASIC not in text, path
    transcript = files[out_dir / "simplicity.transcript.jsonl"]
    assert "AUTHORIZATION: basic [REDACTED:authorization]" in transcript
    assert all(json.loads(line) for line in transcript.splitlines())
    assert "the CI token [REDACTED:github-token] leaks" in files[out_dir / "simplicity.md"]
    assert "[REDACTED:github-token]" in files[out_dir / "report.html"]
    assert GITHUB not in json.dumps(outcome.report.document)  # what `--json` prints


def test_a_batch_summary_holds_no_token_from_a_failure_reason(tmp_path: Path) -> None:
    reason = f"API error: push to https://x-access-token:{GITHUB}@github.com/o/r refused"
    record = LedgerRecord("t/a", "fp", "failed", 1, reason=reason)
    document = summary_document(
        "batch",
        tmp_path,
        [JobRow("t/a", "a", "failed", 1, record)],
        exit_code=1,
        state="finished",
        not_in_batch=[],
        wall_seconds=1.0,
    )
    write_summary(tmp_path, document)
    for name in ("summary.json", "summary.md"):
        text = (tmp_path / name).read_text()
        assert GITHUB not in text and "[REDACTED:" in text, name
