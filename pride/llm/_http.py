"""HttpEndpoint: what the OpenAI and Anthropic endpoints share.

The transport (POST JSON, read a bounded JSON body or a bounded event stream,
all within the call's deadline, failures translated in one place), the loop
that reads a stream event by event, and the assembly of the one
[`ModelResponse`][pride.llm.ModelResponse]. A wire format supplies the request body
(``payload``), how to read a whole reply (``read_reply``) and one stream
event (``read_event``) into a `ReplyParts`, and
its usage figures (``usage``).
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Protocol

import attrs
import httpx
import trio

from pride.errors import ProviderConnectionError, ProviderError
from pride.messages import Reasoning, Usage

from ._endpoint import (
    Delta,
    Endpoint,
    Generated,
    ReplyParts,
    Reported,
    StreamItem,
    loads_strict,
)
from ._errors import error_for_payload, error_for_status, malformed, public_url, translating
from ._pricing import price_reply
from ._reading import (
    ACCEPT_ENCODING,
    MAX_ERROR_BODY_BYTES,
    BodyReader,
    Deadline,
    Exchange,
    LimitExceeded,
    ResponseLimits,
    UnreadableBody,
    read_body,
    read_prefix,
)
from ._shape import WrongShape, as_object
from ._sse import SseParser
from ._tokens import estimate_request_tokens, estimate_text_tokens
from ._types import ModelRequest, ModelResponse, ToolCall

__all__ = ["AFTER_END_TIMEOUT", "CLOSE_TIMEOUT", "HttpAccess", "HttpEndpoint"]

logger = logging.getLogger("pride.llm")

#: Seconds allowed for closing a response on an error path (shielded).
CLOSE_TIMEOUT = 5.0

#: Seconds a stream is read for after its end marker: what a server sends then
#: (the end of the HTTP body, normally at once) is read so the connection can be
#: reused; a server still sending, or holding the body open, has its connection
#: dropped, and the reply, complete, is delivered all the same.
AFTER_END_TIMEOUT = 1.0


class HttpAccess(Protocol):
    """What an HTTP endpoint needs from its model: a client, the key, the timeout."""

    @property
    def timeout(self) -> float | None:
        """Seconds per network operation (named in timeout messages)."""
        ...

    def http_client(self) -> httpx.AsyncClient:
        """The HTTP client for the current trio run."""
        ...

    def api_key(self) -> str | None:
        """The API key, read now; raises ``AuthenticationFailed`` if required and missing."""
        ...


def _route_url(base_url: str, route: str) -> str:
    """``route`` appended to the path of ``base_url``, keeping its query (Azure's api-version)."""
    try:
        base = httpx.URL(base_url)
    except httpx.InvalidURL:
        return base_url.rstrip("/") + route  # httpx refuses it when the call is made
    return str(base.copy_with(path=base.path.rstrip("/") + route))


async def _close(reader: BodyReader) -> None:
    with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
        await reader.aclose()


class HttpEndpoint(Endpoint):
    """Shared HTTP behaviour of the provider endpoints.

    Args:
        provider: the provider name.
        model: the model name sent in requests.
        base_url: the API root; requests go to ``base_url + route``.
        access: the model's HTTP client, key and timeout.
        limits: the bounds on what is read of a reply.
    """

    #: The path under the API root that this wire format POSTs to.
    route: str = ""
    #: Send a ``response_format`` natively (else as an instruction in the system
    #: text); set from the provider's ``ProviderInfo``.
    structured_output: bool = False

    public_url: str
    #: Event data that ends a stream without being JSON (OpenAI's ``[DONE]``).
    end_markers: frozenset[str] = frozenset()
    #: What a complete stream ends with, named when one stops short.
    stream_end = "its end"
    #: The ``provider`` of the reasoning this wire format returns (`pride.messages.reasoning`).
    reasoning_format = ""

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        base_url: str,
        access: HttpAccess,
        limits: ResponseLimits,
    ) -> None:
        self.provider = provider
        self.model = model
        self.url = url = _route_url(base_url, self.route)
        self.public_url = public_url(url)
        self.limits = limits
        self._access = access
        self._headers_key: str | None = None
        self._unreported_noted = False
        self._headers: tuple[dict[str, str], dict[str, str]] = self._make_headers(None)

    # -- what a wire format supplies ----------------------------------------------------

    @abc.abstractmethod
    def payload(
        self, request: ModelRequest, options: dict[str, Any], stream: bool
    ) -> dict[str, Any]:
        """The JSON body for ``request`` (exposed for tests and debugging)."""

    @abc.abstractmethod
    def read_reply(self, data: dict[str, Any], reply: ReplyParts) -> None:
        """Read a whole (plain) reply into ``reply``.

        Raises:
            WrongShape: a value has the wrong JSON type (its path named).
        """

    @abc.abstractmethod
    def read_event(self, event: dict[str, Any], reply: ReplyParts) -> Delta:
        """Read one stream event into ``reply``; return its delta (``""`` if none): a
        text delta, or a [`ReasoningDelta`][pride.ReasoningDelta].

        Raises:
            WrongShape: a value has the wrong JSON type (its path named).
            ProviderError: the event reports an error (see `payload_error`).
        """

    @abc.abstractmethod
    def usage(self, figures: dict[str, Any]) -> Usage:
        """The `Usage` of the figures gathered in ``ReplyParts.usage`` (unpriced)."""

    def complete(self, reply: ReplyParts) -> bool:
        """Whether a stream that ended here had delivered the whole reply."""
        return reply.done

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Request headers carrying ``key`` (``Authorization: Bearer`` by default)."""
        return {"authorization": f"Bearer {key}"} if key else {}

    # -- the two calls ------------------------------------------------------------------

    async def send(
        self,
        request: ModelRequest,
        options: dict[str, Any],
        deadline: Deadline,
        exchange: Exchange | None = None,
    ) -> ModelResponse:
        data = await self.post_json(
            self.payload(request, options, stream=False), deadline, exchange
        )
        reply = ReplyParts(self.model)
        try:
            self.read_reply(as_object(data, ""), reply)
        except WrongShape as exc:
            raise self._wrong_shape(exc) from exc
        return self.response(reply, request)

    async def stream(
        self,
        request: ModelRequest,
        options: dict[str, Any],
        deadline: Deadline,
        exchange: Exchange | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        reply = ReplyParts(self.model)
        payload = self.payload(request, options, stream=True)
        number = 0
        reported: dict[str, Any] = {}
        async with aclosing(self.post_sse(payload, deadline, exchange)) as events:
            async for data in events:
                number += 1
                if data in self.end_markers:
                    reply.done = True
                    break
                try:
                    event = loads_strict(data)
                except (ValueError, RecursionError) as exc:
                    raise self._malformed(
                        f"a stream event is not JSON (event {number})", exc
                    ) from exc
                try:
                    delta = self.read_event(as_object(event, ""), reply)
                except WrongShape as exc:
                    raise self._wrong_shape(exc.in_event(number)) from exc
                if reply.generated:  # what the provider bills, though no consumer sees it
                    pieces = reply.generated
                    reply.generated = []
                    for piece in pieces:
                        yield Generated(piece)
                if reply.usage and reply.usage != reported:  # counted if the stream is cut
                    reported = dict(reply.usage)
                    yield Reported(self.usage(reported))
                if delta:
                    yield delta
                if reply.done:
                    break
            if reply.done:
                await self._after_end(events)
        if not self.complete(reply):
            raise ProviderConnectionError(
                f"{self.provider}: the stream from POST {self.public_url} ended before the "
                f"reply was complete (no {self.stream_end})",
                provider=self.provider,
                url=self.public_url,
            )
        yield self.response(reply, request)

    async def _after_end(self, events: AsyncGenerator[str, None]) -> None:
        """Read what the stream sends after its end marker, for `AFTER_END_TIMEOUT` at most.

        The reply is whole by then: whatever comes after (more events, a failure,
        or nothing while the server holds the body open) is no part of it. Only
        the end of the body is waited for, so that the connection can be reused;
        reading stops at the bound, and closing the stream drops the connection.
        """
        with trio.move_on_after(AFTER_END_TIMEOUT) as waited:
            try:
                async for _ in events:
                    pass
            except ProviderError as exc:
                logger.debug("%s: after its end, the stream failed: %s", self.provider, exc)
                return
        if waited.cancelled_caught:
            logger.debug(
                "%s: the stream from POST %s went on past its end for %.0f s; dropped its "
                "connection",
                self.provider,
                self.public_url,
                AFTER_END_TIMEOUT,
            )

    def response(self, reply: ReplyParts, request: ModelRequest) -> ModelResponse:
        """The one [`ModelResponse`][pride.llm.ModelResponse] of a reply read whole or streamed.

        A reply that reports no usage at all (a compatible server ignoring
        ``stream_options.include_usage``, a stream cut after its finish reason)
        is counted at pride's estimate of ``request`` and of the reply: counted
        as nothing, it was priced at $0.00 and no budget's token or cost limit
        ever held against it.
        """
        text = "".join(reply.text)
        tool_calls = reply.tool_calls()
        reasoning = reply.reasoning_blocks(self.reasoning_format, self.origin)
        if reply.usage:
            usage = self.usage(reply.usage)
        else:
            usage = self._estimated(request, text, tool_calls, reasoning)
        if usage.cost_usd is None:
            cost = price_reply(self.provider, self.model, reply.model, usage)
            if cost is not None:
                usage = attrs.evolve(usage, cost_usd=cost)
        return ModelResponse(
            text=text,
            tool_calls=tool_calls,
            usage=usage,
            model=reply.model,
            provider=self.provider,
            finish_reason=reply.finish_reason,
            reasoning=reasoning,
        )

    def _estimated(
        self,
        request: ModelRequest,
        text: str,
        tool_calls: tuple[ToolCall, ...],
        reasoning: tuple[Reasoning, ...],
    ) -> Usage:
        """The usage of a reply that reported none, estimated (said once per endpoint)."""
        if not self._unreported_noted:
            self._unreported_noted = True
            logger.warning(
                "%s/%s: a reply from POST %s reported no usage; counting pride's estimate "
                "of its tokens (budgets and prices apply to it)",
                self.provider,
                self.model,
                self.public_url,
            )
        generated = [text, *(block.reasoning for block in reasoning)]
        generated.extend(call.name + json.dumps(call.arguments) for call in tool_calls)
        return Usage(
            input_tokens=estimate_request_tokens(request),
            output_tokens=sum(estimate_text_tokens(part) for part in generated if part),
        )

    def payload_error(self, error: Any) -> ProviderError:
        """The exception for an error the provider reported inside a stream."""
        return error_for_payload(
            error, provider=self.provider, url=self.public_url, secret=self._headers_key
        )

    def _malformed(self, what: str, exc: Exception | None = None) -> ProviderError:
        return malformed(self.provider, self.public_url, what, exc)

    def _wrong_shape(self, exc: WrongShape) -> ProviderError:
        return malformed(
            self.provider,
            self.public_url,
            f"the JSON has the wrong shape: {exc}",
            path=exc.path,
        )

    # -- transport ------------------------------------------------------------------------

    def _make_headers(self, key: str | None) -> tuple[dict[str, str], dict[str, str]]:
        headers = {**self.auth_headers(key), "accept-encoding": ACCEPT_ENCODING}
        return headers, {**headers, "accept": "text/event-stream"}

    def _current_headers(self) -> tuple[tuple[dict[str, str], dict[str, str]], str | None]:
        key = self._access.api_key()
        if key != self._headers_key:
            self._headers = self._make_headers(key)
            self._headers_key = key
        return self._headers, key

    async def _accept(
        self,
        response: httpx.Response,
        key: str | None,
        deadline: Deadline | None,
        exchange: Exchange | None,
    ) -> BodyReader:
        """A reader of the body of ``response``, if its status is a success.

        ``deadline`` bounds each read of the body (``None``: the caller bounds them).
        ``exchange`` is told of an error status: the provider answered the
        attempt without running it, and a refusal bills nothing.

        The callers send the request themselves (``client.send`` under the
        deadline), so that this frame is not on the stack of every network
        wait of a call: each coroutine layer costs on every resumption.

        Raises:
            ProviderError: a subclass for an error status (the error body is
                read, up to `MAX_ERROR_BODY_BYTES`).
        """
        if exchange is not None and response.status_code >= 400:
            exchange.refused()
        try:
            reader = BodyReader(response, deadline)
        except UnreadableBody:
            with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
                await response.aclose()
            raise
        if response.status_code >= 400:
            try:
                body = await read_prefix(reader, MAX_ERROR_BODY_BYTES)
            finally:
                await _close(reader)
            raise error_for_status(
                response.status_code,
                body,
                response.headers,
                provider=self.provider,
                url=self.public_url,
                model=self.model,
                secret=key,
            )
        return reader

    def _request(
        self,
        client: httpx.AsyncClient,
        payload: dict[str, Any],
        headers: dict[str, str],
        exchange: Exchange | None,
    ) -> httpx.Request:
        """The POST of ``payload``; with an ``exchange``, one attempt of its call,
        traced (httpcore's ``trace`` extension) to tell when its body went whole."""
        if exchange is None:
            return client.build_request("POST", self.url, json=payload, headers=headers)
        exchange.attempt()
        return client.build_request(
            "POST", self.url, json=payload, headers=headers, extensions={"trace": exchange.trace}
        )

    async def post_json(
        self, payload: dict[str, Any], deadline: Deadline, exchange: Exchange | None = None
    ) -> Any:
        """POST ``payload`` and return the decoded JSON reply; ``exchange`` is told
        when the request's body was written whole, and when an error status refused it.

        Raises:
            ProviderError: a subclass for an error status, a transport failure,
                the deadline, a body past ``limits.max_body_bytes`` or one that
                is not strict JSON.
        """
        (headers, _), key = self._current_headers()
        access = self._access
        with translating(
            self.provider, self.public_url, secret=key, timeout=access.timeout, deadline=deadline
        ):
            client = access.http_client()
            request = self._request(client, payload, headers, exchange)
            # One scope bounds the whole exchange: a coroutine may hold one across its awaits.
            with trio.move_on_at(deadline.at) as scope:
                response = await client.send(request, stream=True)
                reader = await self._accept(response, key, None, exchange)
                try:
                    body = await read_body(reader, self.limits.max_body_bytes)
                finally:
                    await _close(reader)
            if scope.cancelled_caught:
                raise trio.TooSlowError
        try:
            return loads_strict(body)
        except (ValueError, RecursionError) as exc:
            raise self._malformed("the response is not JSON", exc) from exc

    async def post_sse(
        self, payload: dict[str, Any], deadline: Deadline, exchange: Exchange | None = None
    ) -> AsyncGenerator[str, None]:
        """POST ``payload`` and yield the data of each server-sent event of the reply;
        ``exchange`` is told as `post_json`'s is.

        Each line and event is bounded by ``limits.max_event_bytes``, the whole
        stream by ``limits.max_stream_bytes``, and every read by the deadline.
        The caller must close the generator; closing it closes the response.
        """
        (_, headers), key = self._current_headers()
        limits = self.limits
        with translating(
            self.provider,
            self.public_url,
            secret=key,
            timeout=self._access.timeout,
            deadline=deadline,
        ):
            client = self._access.http_client()
            request = self._request(client, payload, headers, exchange)
            with trio.move_on_at(deadline.at) as scope:
                response = await client.send(request, stream=True)
            if scope.cancelled_caught:
                raise trio.TooSlowError
            reader = await self._accept(response, key, deadline, exchange)
            try:
                content_type = reader.content_type
                if "text/event-stream" not in content_type:
                    raise UnreadableBody(f"not an event stream (content-type {content_type!r})")
                parser = SseParser(limits.max_event_bytes)
                total = 0
                while chunk := await reader.read():
                    total += len(chunk)
                    if total > limits.max_stream_bytes:
                        raise LimitExceeded(
                            "max_stream_bytes", limits.max_stream_bytes, "the streamed reply"
                        )
                    for data in parser.feed(chunk):
                        yield data
                for data in parser.close():
                    yield data
            finally:
                await _close(reader)
