"""/diff and /undo through a session's own turns (local tool-server sandboxes, a scripted
model): a Bash command's change is a turn's change too, the agent hears of the undo,
and a turn that changed nothing is not one /undo counts."""

from __future__ import annotations

import json
from pathlib import Path

from sandbox_runner.session.commands import Commands
from sandbox_runner.tools.permissions import Approval
from tests.support.scripted_model import reply, say, use
from tests.unit.test_session import FakeUI, Models, open_session


def test_a_commands_change_is_undone_and_the_agent_is_told(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "repo"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    models = Models(
        {
            "work": [
                reply(use("Bash", {"command": "echo changed > src/app.py; echo x > made.txt"})),
                reply(say("Changed.")),
                reply(say("Nothing to change.")),
                reply(say("Understood.")),
            ]
        }
    )
    ui = FakeUI()
    ui.approvals = [Approval(True)]
    session = open_session(workspace, tmp_path, models, ui)
    try:
        session.start()
        commands = Commands(session)
        session.send("change it")
        session.send("just talk")  # changes nothing: not a turn /undo counts
        assert (workspace / "src" / "app.py").read_text() == "changed\n"
        outcome = commands.run("/diff")
        assert outcome.lines == [
            "2 files changed by the agent this session: 2 lines added, 1 removed"
        ]
        assert "+changed" in [line.text for line in outcome.diff]
        lines = commands.run("/undo").lines
        assert lines[0] == "undid turn 1:"
        assert (workspace / "src" / "app.py").read_text() == "print('hi')\n"
        assert not (workspace / "made.txt").exists()
        session.send("what now?")
        sent = json.dumps(models.made["work"].requests[-1].messages[-1])
        assert "The user undid your changes" in sent and "src/app.py" in sent
    finally:
        session.close()
