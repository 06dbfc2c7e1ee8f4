"""The wire protocol: one JSON request per line in, one response per line out."""

from __future__ import annotations

JsonDict = dict[str, object]

PROTOCOL_VERSION = 1
# A request's timeout in seconds when it gives none, and the range it is clamped to.
DEFAULT_TIMEOUT = 120.0
MIN_TIMEOUT = 0.1
MAX_TIMEOUT = 600.0
# The largest output of one response (the host accepts at least this much).
MAX_OUTPUT_BYTES = 256 * 1024


class ToolError(Exception):
    """A tool failure the model should see: becomes ok=false with a one-line message."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.timed_out = timed_out


class Outcome:
    """What an op produced; the dispatcher turns it into a response line."""

    __slots__ = ("exit_code", "meta", "output", "timed_out", "truncated")

    def __init__(
        self,
        output: str,
        *,
        truncated: bool = False,
        exit_code: int | None = None,
        timed_out: bool = False,
        meta: JsonDict | None = None,
    ) -> None:
        self.output = output
        self.truncated = truncated
        self.exit_code = exit_code
        self.timed_out = timed_out
        self.meta: JsonDict = meta if meta is not None else {}

    def response(self, request_id: object) -> JsonDict:
        return {
            "id": request_id,
            "ok": True,
            "output": self.output,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "error": None,
            "meta": self.meta,
        }


def failure(request_id: object, message: str, *, timed_out: bool = False) -> JsonDict:
    """Build an ok=false response; the message is folded onto one line for the model."""
    return {
        "id": request_id,
        "ok": False,
        "output": "",
        "exit_code": None,
        "timed_out": timed_out,
        "truncated": False,
        "error": " ".join(message.split("\n")),
        "meta": {},
    }
