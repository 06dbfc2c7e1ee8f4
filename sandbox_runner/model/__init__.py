"""Model layer: the Anthropic model and the replay model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from sandbox_runner.model.replay import (
    RecordingModel,
    ReplayModel,
    check_record,
    check_replay,
    estimate_tokens,
)

KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def check_model_options(
    replay: Path | None, record: Path | None, keys: Sequence[str], env: Mapping[str, str]
) -> None:
    """Refuse, before anything starts, model options that would fail every plan later.

    Args:
        replay, record: the --replay and --record paths, if given.
        keys: the labels of the run's plans (one cassette each).
        env: the environment holding the API key.

    Raises:
        ConfigError: both --replay and --record, a cassette missing for a plan, a --record
            that is a file or holds cassettes, or no API key when the API is to be called.
    """
    if replay is not None and record is not None:
        raise ConfigError(
            "--replay and --record cannot be used together: --replay plays a recording "
            "without calling the API"
        )
    if replay is not None:
        check_replay(replay, list(keys))
        return
    if not any(env.get(name) for name in KEY_VARIABLES):
        if env.get("ANTHROPIC_BASE_URL"):
            raise ConfigError(
                "ANTHROPIC_BASE_URL is set but ANTHROPIC_API_KEY is not: export the key "
                "(or ANTHROPIC_AUTH_TOKEN) for that endpoint too"
            )
        raise ConfigError(
            "ANTHROPIC_API_KEY is not set: export it (or ANTHROPIC_AUTH_TOKEN; "
            "ANTHROPIC_BASE_URL for a compatible endpoint), or use --replay CASSETTE"
        )
    if record is not None:
        check_record(record)


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
    "check_model_options",
    "create_model",
    "estimate_tokens",
]
