"""The Anthropic Messages API as a Model: streaming, retries, token counts (the request's
parameters, with its prompt-cache breakpoints, are built in request_params.py; the SDK's
client in sdk_client.py; its answer read into our types in sdk_message.py).

Everything it returns is our own value types, with content blocks as plain JSON dicts.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2  # the SDK's own HTTP library: a transport that answers in memory
from anthropic.lib.streaming import MessageStream
from anthropic.types import Message

from sandbox_runner.limits import API_RETRIES, API_TIMEOUT_SECONDS
from sandbox_runner.model.canned_stream import CANNED_SSE
from sandbox_runner.model.errors import (
    MalformedAnswerError,
    ModelAPIError,
    ModelError,
    api_status_error,
    unreadable_response,
)
from sandbox_runner.model.replay import estimate_tokens
from sandbox_runner.model.request_params import build_params
from sandbox_runner.model.retry_policy import (
    overloaded,
    parse_retry_after,
    retry_wait,
    retryable,
)
from sandbox_runner.model.sdk_client import (
    CONNECT_SECONDS,
    error_object,
    has_credentials,
    make_client,
)
from sandbox_runner.model.sdk_message import to_response
from sandbox_runner.types import ModelCall, ModelRequest, ModelResponse, StreamEvent

log = logging.getLogger(__name__)

STREAMING_ABOVE_MAX_TOKENS = 16_000
"""The SDK refuses non-streaming requests that may run longer than ten minutes."""
COUNT_ENDPOINT_MISSING = frozenset({404, 405, 501})


class _UnreadableAnswer(Exception):
    """The SDK could not read the model's answer: streamed tool input that is not valid
    JSON, or JSON nested too deeply for Python's parser (a RecursionError)."""

    def __init__(self, summary: str, error: BaseException) -> None:
        self.summary = summary
        super().__init__(" ".join(str(error).split())[:300])


_Failure = anthropic.APIError | _UnreadableAnswer
_TOO_DEEP = "the model kept answering with JSON nested too deeply to read"


class AnthropicModel:
    """A Model backed by the Anthropic Messages API (or a compatible endpoint)."""

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = API_RETRIES,
        timeout: float = API_TIMEOUT_SECONDS,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """Configure the model; nothing is checked or contacted until the first call.

        Args:
            model_id: the model used when a request names none.
            api_key: the API key; by default the SDK reads ANTHROPIC_API_KEY.
            base_url: the API's URL; by default ANTHROPIC_BASE_URL or the public API.
            max_retries: retries after the first attempt for overloads and network errors.
            timeout: seconds to wait for one response (capped by a call's deadline).
            sleep: how to wait between attempts (tests pass a recorder); by default the
                call's own wait, which an abort cuts short.
        """
        self.model_id = model_id
        self.max_retries = max_retries
        self.timeout = timeout
        self._api_key = api_key
        self._base_url = base_url
        self._sleep = sleep
        self._client: anthropic.Anthropic | None = None
        self._client_lock = threading.Lock()
        self._count_endpoint_missing = False

    @property
    def client(self) -> anthropic.Anthropic:
        """The SDK client, made on first use so a missing key fails then, not at import."""
        with self._client_lock:
            if self._client is None:
                try:
                    client = make_client(
                        timeout=self.timeout, api_key=self._api_key, base_url=self._base_url
                    )
                except anthropic.CredentialsError as error:
                    # A broken ANTHROPIC_PROFILE or config directory is named by the SDK.
                    reason = " ".join(str(error).split())
                    raise ModelError(
                        f"the Anthropic credentials cannot be loaded: {reason}"
                    ) from error
                if not has_credentials(client):
                    raise ModelError(
                        "ANTHROPIC_API_KEY is not set; export your Anthropic API key "
                        "(or replay a recorded cassette) to run the model"
                    )
                self._client = client
            return self._client

    def complete(self, request: ModelRequest, call: ModelCall | None = None) -> ModelResponse:
        """Send one request, retrying overloads and network errors, and return the answer.

        No attempt runs past the call's deadline, and an abort ends the waits between
        attempts.

        Raises:
            ModelAPIError: the API refused the request, or failed on every attempt.
            ContextBudgetError: the request does not fit in the model's context window.
            ModelError: the call was aborted.
        """
        params = build_params(request, request.model or self.model_id)
        call = call or ModelCall()
        # Someone listening streams the answer; so does a long one, which the SDK insists on.
        streaming = call.on_stream is not None or request.max_tokens > STREAMING_ABOVE_MAX_TOKENS
        try:
            message = self._with_retries(
                lambda timeout: self._send(params, streaming, timeout, call), call
            )
            return to_response(message)
        except (AttributeError, TypeError, ValueError) as error:
            # A body that is not JSON (JSONDecodeError), or JSON of another shape, which
            # the SDK hands over unvalidated and to_response then trips on.
            raise unreadable_response(error) from error

    def count_tokens(self, request: ModelRequest) -> int:
        """Input tokens from the count_tokens endpoint, or an estimate when it cannot answer."""
        client = self.client
        if not self._count_endpoint_missing:
            try:
                counted = client.messages.count_tokens(
                    model=request.model or self.model_id,
                    system=request.system,
                    tools=[tool.to_param() for tool in request.tools],  # type: ignore[misc]
                    messages=request.messages,  # type: ignore[arg-type]
                )
                return counted.input_tokens
            except anthropic.APIStatusError as error:
                # A compatible endpoint without count_tokens will never grow one.
                self._count_endpoint_missing = error.status_code in COUNT_ENDPOINT_MISSING
                log.debug("count_tokens failed (%s); estimating", error.status_code)
            except anthropic.APIConnectionError as error:
                log.debug("count_tokens failed (%s); estimating", error)
        return estimate_tokens(request)

    def _send(
        self, params: dict[str, Any], streaming: bool, seconds: float, call: ModelCall
    ) -> Message:
        timeout = anthropic.Timeout(seconds, connect=min(seconds, 10.0))
        try:
            if not streaming:
                # The params are a dict, so mypy cannot pick create()'s non-streaming overload.
                message: Message = self.client.messages.create(
                    **params, stream=False, timeout=timeout
                )
                return message
            with self.client.messages.stream(**params, timeout=timeout) as stream:
                if "text/event-stream" in stream.response.headers.get("content-type", ""):
                    return _final_message(stream, call)
                # A proxy or compatible endpoint answered with a plain JSON Message: the
                # SDK would read it as events, find none, and fail a bare assert.
                body = stream.response.read()
        except RecursionError as error:
            # The SDK parses the body with json.loads, which recurses per level: an answer
            # nested thousands deep. Asked again, the model usually answers otherwise.
            raise _UnreadableAnswer(_TOO_DEEP, error) from None
        except ValueError as error:
            if not streaming:
                raise
            # The SDK parses streamed tool input as it arrives and gives up on invalid
            # JSON; asked again, the model usually answers with valid input.
            summary = "the model kept streaming tool input that is not valid JSON"
            raise _UnreadableAnswer(summary, error) from error
        return _json_message(body)

    def _with_retries(self, send: Callable[[float], Message], call: ModelCall) -> Message:
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            seconds = self._attempt_timeout(call)
            try:
                return send(seconds)
            except (
                anthropic.APIStatusError,
                anthropic.APIConnectionError,
                _UnreadableAnswer,
            ) as error:
                if call.aborted:
                    raise ModelError("the model call was cancelled") from None
                if not _retryable(error) or attempt == attempts:
                    raise self._failure(error, attempt, seconds) from error
                wait = _retry_wait(error, attempt)
                remaining = call.remaining()
                if remaining is not None and wait >= remaining:
                    # Another attempt could not finish before the deadline anyway.
                    raise self._failure(error, attempt, seconds) from error
                log.debug("model API: %s; retrying in %.1f s", _describe(error), wait)
                call.retrying(attempt + 1, attempts, _describe(error), wait)
                if self._sleep is not None:
                    self._sleep(wait)
                elif call.wait(wait):
                    raise ModelError("the model call was cancelled") from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _attempt_timeout(self, call: ModelCall) -> float:
        """Seconds one attempt may take: the API timeout, but never past the deadline."""
        if call.aborted:
            raise ModelError("the model call was cancelled")
        remaining = call.remaining()
        if remaining is None:
            return self.timeout
        if remaining <= 0:
            raise ModelError("the model call ran out of time before it could be sent")
        return min(self.timeout, remaining)

    def _failure(self, error: _Failure, attempts: int, seconds: float) -> ModelError:
        """The one-line error a user sees for an API error we will not retry."""
        if isinstance(error, _UnreadableAnswer):
            return MalformedAnswerError(error.summary, api_message=str(error), attempts=attempts)
        if isinstance(error, anthropic.APITimeoutError):
            summary = (
                f"the Anthropic API at {self.client.base_url} did not answer in {seconds:.0f} s"
            )
            return ModelAPIError(summary, attempts=attempts, hint="see api_timeout")
        if isinstance(error, anthropic.APIConnectionError):
            url = self.client.base_url
            summary = f"cannot reach the Anthropic API at {url}"
            return ModelAPIError(summary, api_message=error.message, attempts=attempts)
        assert isinstance(error, anthropic.APIStatusError)
        error_type, api_message = _error_details(error)
        return api_status_error(error.status_code, error_type, api_message, attempts)


def warm_up() -> None:
    """Have the SDK build its parsers of a streamed answer now, while the user types:
    pydantic builds them on first use, half a second that would delay the first token
    of the first answer. A canned stream is read the way a call reads one, in memory."""
    try:
        _read_canned_stream()
    except Exception as error:  # a warm-up that fails costs only the time it would save
        log.debug("warming up the SDK failed: %r", error)


def _read_canned_stream() -> None:
    sse = {"content-type": "text/event-stream"}
    transport = httpx2.MockTransport(lambda _: httpx2.Response(200, headers=sse, text=CANNED_SSE))
    with make_client(
        timeout=CONNECT_SECONDS, api_key="warm-up", base_url="http://warm-up.invalid",
        http_client=httpx2.Client(transport=transport),
    ) as client, client.messages.stream(
        model="m", max_tokens=1, messages=[{"role": "user", "content": "-"}]
    ) as stream:  # fmt: skip
        _final_message(stream, ModelCall(on_stream=lambda _: None))


def _final_message(stream: MessageStream[Any], call: ModelCall) -> Message:
    """The Message the stream's events put together, its text passed on to the call's
    listener as it arrives; an abort closes the stream at the next event."""
    try:
        for event in stream:
            if call.aborted:
                stream.close()
                raise ModelError("the model call was cancelled")
            if event.type == "text":
                call.stream(StreamEvent("text", event.text))
            elif event.type == "content_block_stop" and event.content_block.type == "text":
                call.stream(StreamEvent("text_end", event.content_block.text))
        return stream.get_final_message()
    except AssertionError as error:
        # The SDK asserts that a message_start arrived: the stream ended before any did.
        missing = ValueError("the stream ended before its message_start event")
        raise _UnreadableAnswer("the API's streams kept ending before any message", missing) from (
            error
        )


def _json_message(body: bytes) -> Message:
    """A Message from a plain JSON body, built as leniently as the SDK builds the answer
    to a non-streaming request (what it cannot read fails in to_response)."""
    try:
        data = json.loads(body)
    except RecursionError as error:
        raise _UnreadableAnswer(_TOO_DEEP, error) from None
    if not isinstance(data, dict):
        raise TypeError(f"a JSON {type(data).__name__} instead of a Message object")
    return Message.construct(**data)


def _retryable(error: _Failure) -> bool:
    if isinstance(error, anthropic.APIConnectionError | _UnreadableAnswer):
        return True
    assert isinstance(error, anthropic.APIStatusError)
    return retryable(error.status_code, _error_details(error)[0])


def _retry_wait(error: _Failure, attempt: int) -> float:
    if not isinstance(error, anthropic.APIStatusError):
        return retry_wait(attempt)
    return retry_wait(
        attempt,
        retry_after=parse_retry_after(error.response.headers),
        overload=overloaded(error.status_code, _error_details(error)[0]),
    )


def _error_details(error: anthropic.APIStatusError) -> tuple[str | None, str | None]:
    """The API's error type and message, from the error JSON when there is one."""
    details = error_object(error)
    if details is not None:
        return details.get("type"), details.get("message")
    return None, str(error.body) if error.body else None


def _describe(error: _Failure) -> str:
    if isinstance(error, anthropic.APIStatusError):
        error_type, api_message = _error_details(error)
        status = error.status_code if error.status_code >= 400 else "stream"
        return f"{status} {error_type or ''}: {api_message or ''}"
    return error.message if isinstance(error, anthropic.APIError) else str(error)
