"""Model layer: the Anthropic model and the replay model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox_runner import Model
from sandbox_runner.errors import ConfigError
from sandbox_runner.model.errors import (
    CassetteError,
    ContextBudgetError,
    ModelAPIError,
    ModelError,
)
from sandbox_runner.model.replay import RecordingModel, ReplayModel, estimate_tokens


def create_model(
    model_id: str,
    *,
    replay: str | Path | None = None,
    record: str | Path | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    key: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> Model:
    """The model a run should use: a cassette played back, or the API (perhaps recorded).

    Args:
        model_id: the Anthropic model to call when not replaying.
        replay: a cassette file or directory to play instead of calling the API.
        record: a cassette file (or directory, with `key`) to record the API's answers to.
        api_key: the API key; by default ANTHROPIC_API_KEY.
        base_url: the API's URL; by default ANTHROPIC_BASE_URL or the public API.
        key: which cassette of a cassette directory, e.g. the perspective's name.
        timeout: seconds one API attempt may take (default 600).
        max_retries: retries after the first attempt (default 6).

    Raises:
        ConfigError: both replay and record were asked for.
        CassetteError: the cassette to replay is missing or malformed.
    """
    if replay is not None and record is not None:
        raise ConfigError("--replay and --record cannot be used together")
    if replay is not None:
        return ReplayModel(replay, key=key)
    # Imported here so replaying never pays for loading the anthropic SDK.
    from sandbox_runner.model.anthropic_model import AnthropicModel

    options: dict[str, Any] = {"timeout": timeout, "max_retries": max_retries}
    model: Model = AnthropicModel(
        model_id,
        api_key=api_key,
        base_url=base_url,
        **{name: value for name, value in options.items() if value is not None},
    )
    if record is not None:
        model = RecordingModel(model, record, key=key)
    return model


__all__ = [
    "CassetteError",
    "ContextBudgetError",
    "ModelAPIError",
    "ModelError",
    "RecordingModel",
    "ReplayModel",
    "create_model",
    "estimate_tokens",
]
