"""`/apply-patches`: the edits the plan session proposed, applied in the work container
through the work session's own permission check and approvals (a protected file is asked
about each time, in every mode), as one checkpoint that /undo can take back."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.plans.plan_meta import add_entry
from sandbox_runner.plans.proposed_patches import ProposedPatch, patches_from
from sandbox_runner.tools.permissions import Allow, Ask, Deny, PermissionMode, check
from sandbox_runner.types import ToolCall

if TYPE_CHECKING:
    from sandbox_runner.agents.loop import AgentLoop
    from sandbox_runner.session.session import Session


def apply_patches(session: Session) -> list[str]:
    """Apply the session plan's proposed patches; one line per patch for the user. The
    patches that were not applied stay for another /apply-patches.

    Raises:
        ConfigError: in plan mode, during a turn, or when there is nothing to apply.
    """
    state = session.state
    if state.permission_mode is PermissionMode.PLAN:
        raise ConfigError("/apply-patches applies an accepted plan's patches: /accept first")
    if session.working:
        raise ConfigError("/apply-patches waits for the agent's turn to end")
    patches = patches_from(state.proposed_patches)
    if not patches:
        raise ConfigError("the plan has no proposed patches to apply")
    loop = session.conversations.loop("work")
    lines: list[str] = []
    remaining: list[ProposedPatch] = []
    applied: list[ProposedPatch] = []
    if warning := session.checkpoints.begin():
        lines.append(warning)
    try:
        for number, patch in enumerate(patches, 1):
            problem = _apply(session, loop, patch, number)
            lines.append(f"{patch.file}: {problem or 'applied'}")
            (remaining if problem else applied).append(patch)
    finally:
        if note := session.checkpoints.end():
            lines.append(note)
        state.proposed_patches = [patch.to_dict(with_input=True) for patch in remaining]
        session.save()
    if applied:
        files = ", ".join(patch.file for patch in applied)
        session.notes.add("work", f"The user applied the plan's proposed patches to: {files}.")
        if state.plan_file:
            add_entry(session.plan_file.host_path, "patches_applied", {"files": files})
    return lines


def _apply(session: Session, loop: AgentLoop, patch: ProposedPatch, number: int) -> str:
    """Apply one patch; "" when it was, otherwise why not."""
    if not patch.tool_input:
        return "not applied: too large to keep its edit (ask the agent to make it)"
    tool_input = {**patch.tool_input, "file_path": f"{WORKSPACE_MOUNT}/{patch.file}"}
    call = ToolCall(f"apply-patch-{number}", patch.tool, tool_input)
    config = loop.config
    offered = frozenset(tool.name for tool in config.tools())
    context = dataclasses.replace(config.context, offered=offered)
    decision = check(call, context, config.mode(), config.rules())
    if isinstance(decision, Ask):
        approval = session.ui.approve(decision)
        loop.hooks.on_approval(loop, decision, approval)
        decision = Allow(decision.request) if approval.allowed else Deny("not approved")
    if isinstance(decision, Deny):
        return f"not applied: {decision.message}"
    outcome = loop.sandbox.call(decision.request)
    if not outcome.ok:
        first = (outcome.text or "").strip().splitlines()
        return f"not applied: {first[0] if first else 'the edit failed'}"
    return ""
