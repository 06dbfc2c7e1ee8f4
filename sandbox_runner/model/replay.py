"""Recorded conversations (cassettes): record any Model's exchanges and play them back.

A cassette is a JSON Lines file. The first line is a header, then one line per exchange::

    {"cassette": 1, "model": "claude-...", "recorded_at": "2025-01-01T12:00:00+00:00"}
    {"request": {"model": ..., "system": "<sha256 of the system prompt>",
                 "tools": ["Read", ...], "messages_count": 3, "last_message": {...}},
     "response": {"content": [...], "stop_reason": "tool_use",
                  "usage": {"input_tokens": ..., ...}, "model": ...}}

Only the responses are played back. The request summary is there for people reading
the cassette; replay does not compare it, because paths and timings differ between runs.
A cassette directory holds one cassette per perspective: `<dir>/<key>.jsonl`, with
`<dir>/default.jsonl` for any key without its own.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox_runner import Model
from sandbox_runner.errors import ConfigError
from sandbox_runner.input_depth import nested_deeper_than, without_deep_inputs
from sandbox_runner.limits import MAX_INPUT_DEPTH
from sandbox_runner.model.errors import CassetteError
from sandbox_runner.types import ModelCall, ModelRequest, ModelResponse, Usage

CASSETTE_VERSION = 1
DEFAULT_KEY = "default"
CHARS_PER_TOKEN = 3.5
MAX_CONTENT_DEPTH = MAX_INPUT_DEPTH + 2
"""A response's content nests a tool input two levels down (the list, the block)."""


def estimate_tokens(request: ModelRequest) -> int:
    """Input tokens estimated from the JSON size of system prompt, tools and messages."""
    parts = (request.system, [tool.to_param() for tool in request.tools], request.messages)
    chars = sum(len(json.dumps(part, ensure_ascii=False, default=str)) for part in parts)
    return math.ceil(chars / CHARS_PER_TOKEN)


def resolve_cassette(path: str | Path, key: str | None = None) -> Path:
    """The cassette file for `key`: the path itself, or `<dir>/<key>.jsonl` in a directory."""
    path = Path(path)
    if not path.is_dir():
        return path
    keyed = path / f"{key or DEFAULT_KEY}.jsonl"
    return keyed if keyed.is_file() else path / f"{DEFAULT_KEY}.jsonl"


def has_own_cassette(path: Path, key: str) -> bool:
    """Whether a cassette directory holds `<key>.jsonl` itself (default.jsonl does not count)."""
    return path.is_dir() and (path / f"{key}.jsonl").is_file()


def check_replay(path: Path, keys: list[str]) -> None:
    """Refuse, before a run starts, a cassette (or directory) that cannot serve every key.

    Raises:
        ConfigError: it does not exist, or a directory has neither `<key>.jsonl` nor
            `default.jsonl` for some key (naming the files it looked for).
    """
    if not path.exists():
        raise ConfigError(f"--replay {path} does not exist")
    if not path.is_dir():
        if not path.is_file():
            raise ConfigError(f"--replay {path} is not a cassette file or directory")
        return
    missing = [key for key in keys if not resolve_cassette(path, key).is_file()]
    if missing:
        wanted = ", ".join(f"{key}.jsonl" for key in missing)
        raise ConfigError(
            f"--replay {path} has no cassette for {_plural(missing, 'perspective')} "
            f"{', '.join(missing)}: neither {wanted} nor {DEFAULT_KEY}.jsonl is there"
        )


def check_record(path: Path) -> None:
    """Refuse, before a run starts, a --record target that is a file or holds cassettes.

    Raises:
        ConfigError: path is not a directory, or already holds cassettes (*.jsonl).
    """
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"--record {path} is not a directory; give a directory for the cassettes "
            "(one per perspective)"
        )
    if path.is_dir() and any(path.glob("*.jsonl")):
        raise ConfigError(
            f"--record {path} already holds cassettes; planrun never overwrites them: "
            "give a new directory"
        )


def _plural(items: list[str], noun: str) -> str:
    return noun if len(items) == 1 else f"{noun}s"


def summarize_request(request: ModelRequest) -> dict[str, Any]:
    """The request as a cassette records it: enough to read, not enough to leak the prompt."""
    return {
        "model": request.model,
        "system": hashlib.sha256(request.system.encode()).hexdigest(),
        "tools": [tool.name for tool in request.tools],
        "messages_count": len(request.messages),
        "last_message": request.messages[-1] if request.messages else None,
    }


def response_to_json(response: ModelResponse) -> dict[str, Any]:
    """A ModelResponse as a cassette line stores it."""
    usage = response.usage
    return {
        "content": response.content,
        "stop_reason": response.stop_reason,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
        },
        "model": response.model,
    } | ({} if response.stop_details is None else {"stop_details": response.stop_details})


def response_from_json(data: Any) -> ModelResponse:
    """Rebuild a ModelResponse from a cassette line; ValueError says what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("response is not an object")
    content, usage = data.get("content"), data.get("usage", {})
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise ValueError("response content is not a list of blocks")
    content = without_deep_inputs(content)
    if nested_deeper_than(content, MAX_CONTENT_DEPTH):
        # copy.deepcopy below recurses per level.
        raise ValueError(f"response content is nested more than {MAX_CONTENT_DEPTH} levels deep")
    if not isinstance(data.get("stop_reason"), str):
        raise ValueError("response stop_reason is not a string")
    if not isinstance(usage, dict) or not all(isinstance(v, int) for v in usage.values()):
        raise ValueError("response usage is not an object of token counts")
    details = data.get("stop_details")
    if details is not None and not isinstance(details, dict):
        raise ValueError("response stop_details is not an object")
    fields = Usage.__dataclass_fields__
    return ModelResponse(
        # Deep copies, so a caller editing a response cannot change what is played next.
        content=copy.deepcopy(content),
        stop_reason=data["stop_reason"],
        usage=Usage(**{name: count for name, count in usage.items() if name in fields}),
        model=str(data.get("model") or ""),
        stop_details=copy.deepcopy(details),
    )


def load_cassette(path: Path) -> list[dict[str, Any]]:
    """The recorded responses of a cassette file, checked line by line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise CassetteError(path, f"cannot be read ({error.strerror or error})") from error
    except UnicodeDecodeError as error:
        problem = f"is not UTF-8 text (byte {error.start}): not a cassette, perhaps a binary file"
        raise CassetteError(path, problem) from error
    if not lines:
        raise CassetteError(path, "is empty")
    responses: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CassetteError(path, f"not valid JSON ({error.msg})", line=number) from error
        except RecursionError:
            raise CassetteError(path, "JSON nested too deeply to read", line=number) from None
        if number == 1:
            if not isinstance(record, dict) or record.get("cassette") != CASSETTE_VERSION:
                problem = f'the header must be {{"cassette": {CASSETTE_VERSION}, ...}}'
                raise CassetteError(path, problem, line=number)
            continue
        try:
            response_from_json(record.get("response") if isinstance(record, dict) else None)
        except ValueError as error:
            raise CassetteError(path, str(error), line=number) from error
        responses.append(record["response"])
    return responses


def tool_result_ids(request: ModelRequest) -> list[str]:
    """The tool_use_ids that the last user message of a request answers."""
    for message in reversed(request.messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        return [
            str(block.get("tool_use_id"))
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
    return []


class ReplayModel:
    """A Model that plays a cassette's responses back in order, without any network."""

    def __init__(self, path: str | Path, *, key: str | None = None) -> None:
        """Load the cassette (or `<dir>/<key>.jsonl` of a cassette directory).

        Raises:
            CassetteError: the cassette is missing or malformed (naming file and line).
        """
        self.path = resolve_cassette(path, key)
        if not self.path.is_file():
            raise CassetteError(self.path, "does not exist")
        self._responses = load_cassette(self.path)
        self._played = 0
        self._last_tool_use_ids: list[str] = []
        self._lock = threading.Lock()

    @property
    def played(self) -> int:
        """How many responses have been played so far."""
        return self._played

    @property
    def remaining(self) -> int:
        """How many recorded responses have not been played yet."""
        return len(self._responses) - self._played

    def complete(self, request: ModelRequest, call: ModelCall | None = None) -> ModelResponse:
        """The next recorded response, after checking the request answers the previous one.

        Raises:
            CassetteError: the cassette is exhausted, or the tool_result ids of the request
                do not answer the tool_use ids of the previously played response.
        """
        with self._lock:
            exchange = self._played + 1
            answered = tool_result_ids(request)
            if answered and sorted(answered) != sorted(self._last_tool_use_ids):
                problem = (
                    f"the request answers tool_use ids {answered} but the previous response "
                    f"asked for {self._last_tool_use_ids}; the conversation has diverged"
                )
                raise CassetteError(self.path, problem, exchange=exchange)
            if self._played >= len(self._responses):
                raise CassetteError(self.path, f"has no more responses ({self._played} played)")
            response = response_from_json(self._responses[self._played])
            self._played = exchange
            self._last_tool_use_ids = [call.id for call in response.tool_calls]
            return response

    def count_tokens(self, request: ModelRequest) -> int:
        """An estimate: a cassette has nothing to count with."""
        return estimate_tokens(request)


class RecordingModel:
    """Wraps any Model and appends each exchange to a cassette as it happens."""

    def __init__(self, inner: Model, path: str | Path, *, key: str | None = None) -> None:
        """Record to `path`, or to `<path>/<key>.jsonl` when a key is given."""
        path = Path(path)
        self.inner = inner
        self.path = path / f"{key}.jsonl" if key else path
        self.recorded = 0
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest, call: ModelCall | None = None) -> ModelResponse:
        """Ask the inner model, then write the exchange (a failed call is not recorded)."""
        response = self.inner.complete(request, call)
        # Recorded as the agent loop will see it: json.dumps would recurse into a deep input.
        response = dataclasses.replace(response, content=without_deep_inputs(response.content))
        line = {"request": summarize_request(request), "response": response_to_json(response)}
        with self._lock:
            if self.recorded == 0:
                self._start(request.model)
            # One open, write and flush per line, so a crash keeps every finished exchange.
            with self.path.open("a", encoding="utf-8") as cassette:
                cassette.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            self.recorded += 1
        return response

    def count_tokens(self, request: ModelRequest) -> int:
        """Whatever the inner model counts; counts are not recorded."""
        return self.inner.count_tokens(request)

    def _start(self, model: str) -> None:
        """Create the cassette with its header; an earlier recording is never replaced."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = {
            "cassette": CASSETTE_VERSION,
            "model": model,
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        try:
            with self.path.open("x", encoding="utf-8") as cassette:
                cassette.write(json.dumps(header) + "\n")
        except FileExistsError:
            raise CassetteError(self.path, "exists; planrun never overwrites a recording") from None
