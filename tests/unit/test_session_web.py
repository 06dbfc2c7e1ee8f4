"""The web tools in an interactive session: offered to both conversations (and their
Task subagents) only with a grant, and run without asking, in plan mode too."""

from __future__ import annotations

from pathlib import Path

from sandbox_runner.agents.registry import Registry
from sandbox_runner.limits import RunLimits
from sandbox_runner.session.session import Session
from sandbox_runner.session.state import SessionStore
from sandbox_runner.tools.permissions import PermissionMode
from sandbox_runner.web_grant import WebGrant
from tests.support.scripted_model import reply, say, use
from tests.support.web_server import WebServer, page
from tests.unit.test_session import FakeUI, LocalSandboxes, Models

DOCS = "<h1>Retry policy</h1><p>Retries back off exponentially.</p>"


def web_session(workspace: Path, tmp_path: Path, models: Models, web: WebGrant) -> Session:
    store, state = SessionStore.create(workspace, "claude-test")
    return Session(
        store,
        state,
        workspace=workspace,
        registry=Registry.load(workspace),
        sandboxes=LocalSandboxes(workspace, tmp_path),
        model=models,
        ui=FakeUI(),
        limits=RunLimits(max_turns=20),
        web=web,
    )


def offered_names(models: Models, label: str) -> list[str]:
    return [tool.name for tool in models.made[label].requests[0].tools]


def test_a_granted_session_fetches_without_asking_in_default_and_plan_mode(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    with WebServer({"/retry": page(DOCS)}) as server:
        fetch = use("WebFetch", {"url": server.url("/retry"), "prompt": "How are retries done?"})
        models = Models({"work": [reply(fetch), reply(say("Read it."))]})
        session = web_session(workspace, tmp_path, models, WebGrant.of(["127.0.0.1"]))
        try:
            session.send("how do retries work?")
            session.set_mode(PermissionMode.PLAN)
            models.scripts["plan"] = [reply(fetch), reply(say("Noted for the plan."))]
            session.send("plan around the retry policy")
        finally:
            session.close()
    assert isinstance(session.ui, FakeUI) and session.ui.asked == []
    assert "WebFetch" in offered_names(models, "work")
    assert "WebFetch" in offered_names(models, "plan")
    for label in ("work", "plan"):
        answer = models.made[label].requests[1].messages[-1]["content"][0]
        assert not answer.get("is_error") and "# Retry policy" in answer["content"]
    assert [seen.path for seen in server.seen] == ["/retry", "/retry"]


def test_without_a_grant_neither_conversation_is_offered_a_web_tool(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    models = Models({"work": [reply(say("Hello."))], "plan": [reply(say("Planning."))]})
    session = web_session(workspace, tmp_path, models, WebGrant())
    try:
        session.send("hello")
        session.set_mode(PermissionMode.PLAN)
        session.send("plan something")
    finally:
        session.close()
    for label in ("work", "plan"):
        assert not {"WebFetch", "WebSearch"} & set(offered_names(models, label))
