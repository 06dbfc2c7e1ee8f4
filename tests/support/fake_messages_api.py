"""A fake Anthropic Messages API on 127.0.0.1 that the real anthropic SDK talks to.

Tests, the CLI end-to-end tests and the demo script what the "model" answers, in order::

    with FakeMessagesAPI([
        message(tool_use("Read", {"file_path": "README.md"})),
        message(text("Here is the plan.")),
    ]) as api:
        model = AnthropicModel("claude-test", api_key="test-key", base_url=api.base_url)
        ...
        assert api.message_requests[0].body["system"][0]["cache_control"]

The server speaks the real wire format: non-streaming JSON Messages, server-sent events
when the request says `"stream": true` (message_start, content_block_start, text_delta
and input_json_delta chunks, content_block_stop, message_delta, message_stop, as the API
sends them; `message(..., pace=0.05)` sends a reply's deltas a word at a time, 50 ms
apart), `/v1/messages/count_tokens`, and errors with the API's JSON
shape and status codes. `GET /v1/models/{id}` and `GET /v1/models` answer from its model
list (every model exists when it has none), and a request naming a model not in the list
gets the API's 404 (`not_found_error`, "model: ID"). It never checks that content makes
sense: a script that returns a tool_use whose input is not an object, or names an unknown
tool, gets exactly that.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

Block = dict[str, Any]
MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
MODELS_PATH = "/v1/models"


def text(value: str) -> Block:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: Any, id: str | None = None) -> Block:
    """A tool_use block; `input` is sent as given, so it may be malformed on purpose."""
    return {
        "type": "tool_use",
        "id": id or f"toolu_fake_{uuid.uuid4().hex[:16]}",
        "name": name,
        "input": input,
    }


def thinking(value: str, signature: str = "fake-signature") -> Block:
    """An extended-thinking block, with the signature the API attaches to it."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def server_tool_use(query: str, id: str | None = None) -> Block:
    """The block of a search the API itself runs (its server-side web search tool)."""
    return {
        "type": "server_tool_use",
        "id": id or f"srvtoolu_fake_{uuid.uuid4().hex[:16]}",
        "name": "web_search",
        "input": {"query": query},
    }


def web_search_tool_result(tool_use_id: str, results: Sequence[tuple[str, str]]) -> Block:
    """The results of a server-side search: (title, url) pairs, as the API shapes them."""
    return {
        "type": "web_search_tool_result",
        "tool_use_id": tool_use_id,
        "content": [
            {
                "type": "web_search_result",
                "title": title,
                "url": url,
                "encrypted_content": f"enc-{index}-{uuid.uuid4().hex[:8]}",
                "page_age": "April 30, 2025",
            }
            for index, (title, url) in enumerate(results)
        ],
    }


def usage(
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict[str, int]:
    """The usage object of a Message, cache counts included."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
    }


DEFAULT_USAGE = usage()


@dataclass(frozen=True)
class Reply:
    """A scripted Message: its content blocks, stop reason and usage."""

    content: list[Block]
    stop_reason: str
    usage: dict[str, int]
    model: str | None = None
    stop_details: dict[str, Any] | None = None
    """What the API says about the stop (a refusal's category and explanation)."""
    pace: float = 0.0
    """When streamed: seconds between two deltas, and text sent a word at a time, as a
    model writes it (0: every delta at once, each block in three pieces)."""

    def to_json(self, message_id: str, model: str) -> dict[str, Any]:
        """The Message object as the API returns it (the request's model unless scripted)."""
        details = {} if self.stop_details is None else {"stop_details": self.stop_details}
        return details | {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model or model,
            "content": self.content,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": self.usage,
        }


def message(
    *blocks: Block,
    stop_reason: str | None = None,
    usage: dict[str, int] | None = None,
    model: str | None = None,
    stop_details: dict[str, Any] | None = None,
    pace: float = 0.0,
) -> Reply:
    """A scripted Message; the stop reason defaults to tool_use when a block calls a tool.
    PACE slows its stream down (see Reply.pace)."""
    if stop_reason is None:
        calls_tool = any(block.get("type") == "tool_use" for block in blocks)
        stop_reason = "tool_use" if calls_tool else "end_turn"
    usage = dict(usage or DEFAULT_USAGE)
    return Reply(list(blocks), stop_reason, usage, model, stop_details, pace)


@dataclass(frozen=True)
class ScriptedError:
    """An API error: HTTP status, error type and message, optionally a retry-after header."""

    status: int
    type: str
    message: str
    retry_after: float | None = None
    mid_stream: bool = False
    """For a streaming request: answer 200, start the stream, then send an error event."""
    after_text: str = ""
    """Mid-stream: text streamed before the error event (an answer the API broke off)."""

    def body(self) -> dict[str, Any]:
        """The error JSON exactly as the API shapes it."""
        return {"type": "error", "error": {"type": self.type, "message": self.message}}


def error(
    status: int,
    type: str,
    message: str,
    retry_after: float | None = None,
    *,
    mid_stream: bool = False,
    after_text: str = "",
) -> ScriptedError:
    """A scripted API error, e.g. `error(529, "overloaded_error", "Overloaded")`; with
    AFTER_TEXT, a stream that breaks off after that much of an answer."""
    return ScriptedError(
        status, type, message, retry_after, mid_stream or bool(after_text), after_text
    )


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering, as a failing network or proxy would."""


def drop() -> Drop:
    """A scripted dropped connection."""
    return Drop()


@dataclass(frozen=True)
class Raw:
    """An answer sent exactly as given: a body that is not JSON, or JSON of the wrong shape."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"


def raw(body: bytes | str | Any, status: int = 200, content_type: str = "application/json") -> Raw:
    """A raw answer; anything but bytes or str is sent as JSON (e.g. `{"foo": 1}`)."""
    if isinstance(body, str):
        body = body.encode()
    elif not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return Raw(body, status, content_type)


def nested_tool_use(name: str, depth: int) -> Raw:
    """A Message calling NAME with an input whose arrays nest DEPTH levels deep, written as
    text: json.dumps would itself give up on it."""
    value = '{"file_path": ' + "[" * depth + "]" * depth + "}"
    tool = f'{{"type": "tool_use", "id": "toolu_deep", "name": "{name}", "input": {value}}}'
    body = (
        '{"id": "msg_deep", "type": "message", "role": "assistant", "model": "claude-test", '
        f'"content": [{tool}], "stop_reason": "tool_use", "stop_sequence": null, '
        f'"usage": {json.dumps(DEFAULT_USAGE)}}}'
    )
    return raw(body)


class Hang:
    """Accept the request and never answer (until the server stops), as a hung API would."""


def hang() -> Hang:
    """A scripted request that is never answered."""
    return Hang()


Scripted = Reply | ScriptedError | Drop | Raw | Hang
Script = Sequence[Scripted] | Callable[[dict[str, Any]], Scripted]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received: path, JSON body and headers (names lower-cased),
    and when (time.monotonic(), to order requests of different kinds)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)


def rough_token_count(body: dict[str, Any]) -> int:
    """The default count_tokens answer: about four characters of JSON per token."""
    return max(1, len(json.dumps(body)) // 4)


class FakeMessagesAPI:
    """A scripted Messages API server in a background thread; use it as a context manager.

    Args:
        script: the answers to POST /v1/messages in order, or a function from the request
            JSON to an answer. Once a list runs out, the server answers 400 saying so.
        count_tokens: the answer to /v1/messages/count_tokens: a number, a function of
            the request JSON, or None to answer 404 as an endpoint without it would.
        api_key: when set, requests carrying another key (x-api-key or bearer token) get
            401 authentication_error.
        models: when set, the only model ids that exist: any other gets 404
            not_found_error, as the API answers an unknown model.
    """

    def __init__(
        self,
        script: Script = (),
        *,
        count_tokens: int | Callable[[dict[str, Any]], int] | None = rough_token_count,
        api_key: str | None = None,
        models: Sequence[str] | None = None,
    ) -> None:
        self.models = None if models is None else list(models)
        self.script: list[Scripted] | Callable[[dict[str, Any]], Scripted] = (
            script if callable(script) else list(script)
        )
        self.count_tokens = count_tokens
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        """The POST requests (messages, count_tokens), in order."""
        self.lookups: list[RecordedRequest] = []
        """The GET requests (the models endpoints), in order."""
        self.served = 0
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()
        """Set when the server stops: hung requests end then."""
        self.first_text_sent: list[float] = []
        """time.perf_counter() when each streamed reply's first text delta was sent."""

    @property
    def base_url(self) -> str:
        """The URL to give the SDK (`base_url=` or ANTHROPIC_BASE_URL)."""
        if self._server is None:
            raise RuntimeError("FakeMessagesAPI is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The requests to POST /v1/messages (count_tokens calls left out)."""
        return [request for request in self.requests if request.path == MESSAGES_PATH]

    def add(self, *items: Scripted) -> None:
        """Append answers to a list script."""
        if callable(self.script):
            raise TypeError("cannot add to a callable script")
        self.script.extend(items)

    def start(self) -> Self:
        """Listen on a free port of 127.0.0.1 and serve in a daemon thread."""
        server = _Server(self)
        self._server = server
        # A short poll interval makes stop() quick, which adds up over many tests.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call more than once."""
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def next_answer(self, body: dict[str, Any]) -> Scripted:
        """The scripted answer to one /v1/messages request (thread-safe)."""
        script = self.script
        if callable(script):
            # Called outside the lock: a script may sleep to play a slow model, and the
            # other subagents' requests must not wait for it.
            with self._lock:
                self.served += 1
            return script(body)
        with self._lock:
            if self.served < len(script):
                answer = script[self.served]
            else:
                answer = ScriptedError(
                    400,
                    "invalid_request_error",
                    f"FakeMessagesAPI: the script has no more answers ({self.served} served)",
                )
            self.served += 1
            return answer

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            lookup = request.path.startswith(MODELS_PATH)
            (self.lookups if lookup else self.requests).append(request)

    def knows(self, model_id: str) -> bool:
        """Whether MODEL_ID exists here."""
        return self.models is None or model_id in self.models


class _Server(ThreadingHTTPServer):
    """The HTTP server on a free port of 127.0.0.1, knowing the FakeMessagesAPI it serves."""

    daemon_threads = True

    def __init__(self, api: FakeMessagesAPI) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.api = api

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (a timeout, a cancel) is no error of the server's."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Routes one HTTP request to the FakeMessagesAPI that owns the server."""

    server_version = "FakeMessagesAPI/1"

    @property
    def api(self) -> FakeMessagesAPI:
        assert isinstance(self.server, _Server)
        return self.server.api

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        path = self.path.split("?", 1)[0]
        body = json.loads(raw or b"{}")
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.api.record(RecordedRequest(path, body, headers))
        if self.api.api_key is not None and _api_key(headers) != self.api.api_key:
            self._send_error(ScriptedError(401, "authentication_error", "invalid x-api-key"))
        elif path in (COUNT_TOKENS_PATH, MESSAGES_PATH) and not self.api.knows(
            str(body.get("model"))
        ):
            self._send_error(_unknown_model(str(body.get("model"))))
        elif path == COUNT_TOKENS_PATH:
            self._count_tokens(body)
        elif path == MESSAGES_PATH:
            self._messages(body)
        else:
            self._send_error(ScriptedError(404, "not_found_error", f"Not found: {path}"))

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.api.record(RecordedRequest(path, {}, headers))
        model_id = path.removeprefix(MODELS_PATH + "/")
        if self.api.api_key is not None and _api_key(headers) != self.api.api_key:
            self._send_error(ScriptedError(401, "authentication_error", "invalid x-api-key"))
        elif path == MODELS_PATH:
            listed = [_model_info(model) for model in self.api.models or []]
            first, last = (listed[0]["id"], listed[-1]["id"]) if listed else (None, None)
            page = {"data": listed, "has_more": False, "first_id": first, "last_id": last}
            self._send_json(200, page)
        elif path.startswith(MODELS_PATH + "/") and self.api.knows(model_id):
            self._send_json(200, _model_info(model_id))
        elif path.startswith(MODELS_PATH + "/"):
            self._send_error(_unknown_model(model_id))
        else:
            self._send_error(ScriptedError(404, "not_found_error", f"Not found: {path}"))

    def _count_tokens(self, body: dict[str, Any]) -> None:
        counter = self.api.count_tokens
        if counter is None:
            self._send_error(ScriptedError(404, "not_found_error", "Not found"))
            return
        tokens = counter(body) if callable(counter) else counter
        self._send_json(200, {"input_tokens": tokens})

    def _messages(self, body: dict[str, Any]) -> None:
        answer = self.api.next_answer(body)
        streaming = bool(body.get("stream"))
        if isinstance(answer, Hang):
            self.api.stopping.wait()
            self.close_connection = True
        elif isinstance(answer, Drop):
            # Writing nothing and closing is what the client sees as a dropped connection.
            self.close_connection = True
        elif isinstance(answer, Raw):
            self._send_bytes(answer.status, answer.body, content_type=answer.content_type)
        elif isinstance(answer, ScriptedError) and not (streaming and answer.mid_stream):
            self._send_error(answer)
        elif streaming:
            self._stream(answer, body)
        else:
            assert isinstance(answer, Reply)
            self._send_json(200, answer.to_json(self._message_id(), str(body.get("model"))))

    def _message_id(self) -> str:
        return f"msg_fake_{uuid.uuid4().hex[:16]}"

    def _send_json(self, status: int, payload: dict[str, Any], headers: Sequence[Any] = ()) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), headers)

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        headers: Sequence[Any] = (),
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_fake_{uuid.uuid4().hex[:12]}")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, scripted: ScriptedError) -> None:
        headers = (
            [] if scripted.retry_after is None else [("retry-after", f"{scripted.retry_after:g}")]
        )
        self._send_json(scripted.status, scripted.body(), headers)

    def _stream(self, answer: Reply | ScriptedError, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        model = str(body.get("model"))
        if isinstance(answer, ScriptedError):
            # The API can fail after its 200: a started stream, then an error event.
            started = message(text(answer.after_text))
            events = [_message_start(started, self._message_id(), model)]
            if answer.after_text:
                events += list(_block_events(0, text(answer.after_text)))[:-1]  # no block stop
            events.append(("error", answer.body()))
        else:
            events = list(stream_events(answer, self._message_id(), model))
        pace = answer.pace if isinstance(answer, Reply) else 0.0
        texts = 0
        for name, data in events:
            if name == "content_block_delta" and pace and self.api.stopping.wait(pace):
                break  # the server stops: a slow stream ends as a dropped one would
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
            if data.get("delta", {}).get("type") == "text_delta" and not texts:
                texts += 1
                self.api.first_text_sent.append(time.perf_counter())
        self.close_connection = True


def _unknown_model(model_id: str) -> ScriptedError:
    """The API's answer to a request naming a model it does not have."""
    return ScriptedError(404, "not_found_error", f"model: {model_id}")


def _model_info(model_id: str) -> dict[str, Any]:
    """A ModelInfo object as the models endpoints return it."""
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": "2025-01-01T00:00:00Z",
    }


def _api_key(headers: dict[str, str]) -> str | None:
    """The key a request carries: x-api-key, or a bearer token as newer SDKs send it."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer[7:] if bearer.startswith("Bearer ") else None)


def stream_events(
    reply: Reply, message_id: str, model: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events the API streams for a Message, deltas split into chunks."""
    yield _message_start(reply, message_id, model)
    yield "ping", {"type": "ping"}
    for index, block in enumerate(reply.content):
        yield from _block_events(index, block, by_word=reply.pace > 0)
    delta: dict[str, Any] = {"stop_reason": reply.stop_reason, "stop_sequence": None}
    if reply.stop_details is not None:
        delta["stop_details"] = reply.stop_details
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": reply.usage.get("output_tokens", 0)},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _message_start(reply: Reply, message_id: str, model: str) -> tuple[str, dict[str, Any]]:
    start = reply.to_json(message_id, model) | {"content": [], "stop_reason": None}
    start["usage"] = reply.usage | {"output_tokens": 1}
    start.pop("stop_details", None)  # it comes with the stop, in message_delta
    return "message_start", {"type": "message_start", "message": start}


def _block_events(
    index: int, block: Block, by_word: bool = False
) -> Iterator[tuple[str, dict[str, Any]]]:
    kind = block.get("type")
    deltas: list[dict[str, Any]]
    if kind == "text":
        start = {"type": "text", "text": ""}
        parts = _words(block["text"]) if by_word else _chunks(block["text"])
        deltas = [{"type": "text_delta", "text": part} for part in parts]
    elif kind in ("tool_use", "server_tool_use"):
        start = {key: block[key] for key in ("type", "id", "name")} | {"input": {}}
        partial = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in _chunks(partial)]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": part} for part in _chunks(block["thinking"])
        ]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:
        # Blocks without deltas (redacted_thinking, server tool results) arrive whole.
        start, deltas = block, []
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _words(value: str) -> list[str]:
    """A string in pieces of one word each, with the space before it (the way a model's
    tokens arrive, near enough)."""
    return re.findall(r"\s*\S+|\s+$", value) or [""]


def _chunks(value: str, parts: int = 3) -> list[str]:
    """Split a string into up to `parts` non-empty pieces, as the API splits its deltas."""
    size = max(1, -(-len(value) // parts))
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]
