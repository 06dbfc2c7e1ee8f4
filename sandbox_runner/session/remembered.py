"""The flags a session was opened with that choose its sandboxes and tools (`--image`,
`--network`, `--scratch`, `--allow-web`, `--mcp-config`): kept in its state, so that
`planrun --continue` comes back to the same toolchain, grants and servers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_runner.mcp.launch import McpChoice

if TYPE_CHECKING:
    from sandbox_runner.session.interactive import SessionOptions


def flags_of(options: SessionOptions) -> dict[str, Any]:
    """What of OPTIONS a resume uses again: only what was given."""
    flags: dict[str, Any] = {}
    if options.image:
        flags["image"] = options.image
    if options.network is not None:
        flags["network"] = options.network
    if options.scratch:
        flags["scratch"] = True
    if options.allow_web:
        flags["allow_web"] = list(options.allow_web)
    if options.mcp.config_file is not None:
        flags["mcp_config"] = str(options.mcp.config_file)
        flags["strict_mcp_config"] = options.mcp.strict
    return flags


def with_remembered(options: SessionOptions, flags: dict[str, Any]) -> SessionOptions:
    """OPTIONS, with what the session was opened with wherever the resume gives nothing
    of its own (a flag given now wins)."""
    image, network = flags.get("image"), flags.get("network")
    hosts, config = flags.get("allow_web"), flags.get("mcp_config")
    remembered_hosts = (
        tuple(h for h in hosts if isinstance(h, str)) if isinstance(hosts, list) else ()
    )
    mcp = options.mcp
    if mcp.config_file is None and isinstance(config, str):
        mcp = McpChoice(Path(config), flags.get("strict_mcp_config") is True)
    return replace(
        options,
        image=options.image or (image if isinstance(image, str) else None),
        network=options.network if options.network is not None else _bool_or_none(network),
        scratch=options.scratch or flags.get("scratch") is True,
        allow_web=options.allow_web or remembered_hosts,
        mcp=mcp,
    )


def _bool_or_none(value: object) -> bool | None:
    return value if isinstance(value, bool) else None
