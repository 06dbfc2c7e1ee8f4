"""The error hierarchy: every error planrun reports to a user derives from PlanrunError."""

from __future__ import annotations


class PlanrunError(Exception):
    """Root of planrun's errors; the message is one line a user can act on."""


class ConfigError(PlanrunError):
    """A configuration value, file or flag is invalid."""


class DockerUnavailableError(PlanrunError):
    """No Docker engine can be reached or started."""

    def __init__(self, reason: str, hint: str = "") -> None:
        self.reason = reason
        self.hint = hint
        super().__init__(f"Docker is not available: {reason}" + (f" ({hint})" if hint else ""))


class ImageError(PlanrunError):
    """The sandbox image is missing or could not be built."""


class ImageMissingError(ImageError):
    """The sandbox image for this version of planrun is not present."""

    def __init__(self, tag: str, configured_in: str = "") -> None:
        self.tag = tag
        self.configured_in = configured_in
        if configured_in:
            # `planrun image build` makes planrun's own tag, not the one configured.
            super().__init__(
                f"sandbox image {tag} (set by {configured_in}) is not present; build or pull "
                "it under that tag, or remove the setting to use planrun's own image "
                "(`planrun image build`)"
            )
        else:
            super().__init__(
                f"sandbox image {tag} is not built; run `planrun image build` (or `make image`)"
            )


class WorkspaceError(PlanrunError):
    """The workspace or the plan directory cannot be used."""


class SandboxError(PlanrunError):
    """A sandbox could not be started or stopped working."""


class SandboxDiedError(SandboxError):
    """The container or its tool server died while a request was in flight."""

    def __init__(self, cause: str) -> None:
        self.cause = cause
        super().__init__(f"sandbox died: {cause}")


class ToolTimeoutError(SandboxError):
    """The host gave up waiting for a reply from the tool server."""
