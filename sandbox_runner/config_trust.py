"""Which settings a repository's own config file may not choose: what costs the user money
or runs as their toolchain (unless trusted_projects names the repository), and what only
the user grants."""

from __future__ import annotations

from typing import Any

TRUSTED_ONLY = ("model", "planning_model", "image")
"""What costs the user money or runs as their toolchain: only the user (their file,
environment, flags) sets these, unless trusted_projects names the repository."""
USER_ONLY = ("work_network",)
"""What a project file never sets, trusted or not."""
UNTRUSTED_MODEL_HINT = (
    "only your config, PLANRUN_* variables and flags choose the model, unless "
    "trusted_projects in ~/.planrun/config.yaml names this repository"
)
UNTRUSTED_IMAGE_HINT = (
    "only your config, PLANRUN_IMAGE and --image choose the sandbox image, unless "
    "trusted_projects in ~/.planrun/config.yaml names this repository"
)


def drop_untrusted(
    values: dict[str, Any], sources: dict[str, str], keys: dict[str, str], *, trusted: bool
) -> list[str]:
    """Take out of a project file's settings what it may not set; say what was ignored.

    Args:
        values, sources, keys: the project layer's settings, where and under which key
            each was set (changed in place).
        trusted: whether trusted_projects names the repository.
    """
    dropped = [name for name in USER_ONLY if name in values]
    dropped += [name for name in TRUSTED_ONLY if name in values and not trusted]
    warnings = []
    for name in dropped:
        value, where, key = values.pop(name), sources.pop(name), keys.pop(name)
        if name in USER_ONLY:
            reason = f"only ~/.planrun/config.yaml, PLANRUN_{name.upper()} and flags grant it"
            warnings.append(f"{where}: key {key!r} is ignored: {reason}")
        elif name == "image":
            warnings.append(
                f"{where}: key {key!r} asks for image {value!r}; ignored: {UNTRUSTED_IMAGE_HINT}"
            )
        else:
            warnings.append(
                f"{where}: key {key!r} asks for model {value!r}; ignored: {UNTRUSTED_MODEL_HINT}"
            )
    return warnings
