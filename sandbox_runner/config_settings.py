"""Every setting planrun has: its type, its default and what it does (config.py reads
them from files, the environment and flags; config_values.py says what each accepts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandbox_runner.catalog import READ_ONLY_TOOLS
from sandbox_runner.config_values import DEFAULT_VERIFY_IGNORE
from sandbox_runner.limits import API_RETRIES, API_TIMEOUT_SECONDS, Limits, RunLimits


@dataclass
class Settings:
    """Every setting planrun reads from files, the environment and flags."""

    model: str = "claude-sonnet-4-6"
    """Default model id or alias; agents whose model is "inherit" use it."""
    planning_model: str | None = None
    """Model of plan runs; unset (or "inherit") means `model`."""
    perspectives: dict[str, list[str]] = field(default_factory=dict)
    """Presets: a name expanding to several perspectives, added to BUILTIN_PERSPECTIVES."""
    allowed_tools: list[str] = field(default_factory=lambda: list(READ_ONLY_TOOLS))
    """Tools offered to plan agents; only read-only tools are allowed."""
    extra_dirs: list[str] = field(default_factory=list)
    """Additional read-only directories; relative ones resolve against where they were set."""
    parallel: int = 4
    """Subagents running at the same time."""
    max_turns: int = RunLimits.max_turns
    """Model calls per subagent."""
    timeout: float = RunLimits.timeout_seconds
    """Wall-clock seconds per subagent."""
    max_output_tokens: int = RunLimits.max_output_tokens
    """max_tokens of each model call."""
    max_total_tokens: int = RunLimits.max_total_tokens
    """Input, output and cache tokens over one subagent run."""
    max_cost_usd: float | None = None
    """Estimated USD (list prices) a whole plan run, batch or session may spend; unset: no
    cap. A project file may only lower it."""
    max_cost_usd_per_plan: float | None = None
    """Estimated USD one perspective's plan (or the synthesis) may spend; unset: no cap. A
    project file may only lower it."""
    api_timeout: float = API_TIMEOUT_SECONDS
    """Seconds one model API attempt may take (never past the subagent's timeout)."""
    api_retries: int = API_RETRIES
    """Retries of a model call after an overload, a 5xx, a 429 or a network error."""
    memory_mb: int = Limits.memory_mb
    """Memory of each sandbox container, in MiB."""
    cpus: float = Limits.cpus
    """CPU share of each sandbox container, in cores."""
    pids: int = Limits.pids
    """Processes and threads per sandbox container."""
    image: str | None = None
    """The user's toolchain image, which planrun derives its sandbox image from; unset
    means planrun's own image. A project file sets it only when trusted."""
    planning_enabled: bool = True
    """Whether plan runs are allowed at all."""
    synthesis: bool = True
    """Whether a run with two or more valid plans merges them into a recommended plan."""
    max_plans: int = 8
    """Plans one run may start at most; more perspectives (after presets) are refused."""
    work_disk_mb: int = 1024
    """MiB a work session may add to the repository's disk use (a command past it stops)."""
    work_network: bool = False
    """Whether a session's work sandbox may reach the network; never from a project file."""
    plan_commands: str = "read-only"
    """What a plan agent's commands may do: `read-only` (only commands that read run), or
    `scratch` (any command runs, its writes going to a throw-away copy-on-write layer over
    the repository). A project file may choose read-only, never scratch."""
    scratch_mb: int = Limits.scratch_mb
    """Size of a scratch run's layer, in MiB (at most half of memory_mb is used); a project
    file may only lower it."""
    trusted_projects: list[str] = field(default_factory=list)
    """Repositories (paths) whose config and agent files may choose the model and the
    image; user only."""
    web: list[str] = field(default_factory=list)
    """Hosts WebFetch and WebSearch may reach (`web: {allow: [...]}`); none: no web tools."""
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """MCP servers, and grants to a repository's (docs/mcp.md); user only."""
    mcp_image: str | None = None
    """The image of stdio MCP servers (unset: the sandbox image); user only."""
    verify: list[str] = field(default_factory=lambda: list(DEFAULT_VERIFY_IGNORE))
    """Globs of changed files `planrun verify` does not hold to the plan
    (`verify: {ignore: [...]}`); files under `.planrun/` are never ignored."""
