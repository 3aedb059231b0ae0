"""The endpoint seam, and the HTTP plumbing the provider endpoints share.

An `Endpoint` turns a [`ModelRequest`][pride.llm.ModelRequest] into a
[`ModelResponse`][pride.llm.ModelResponse], once (``send``) or as a stream of text
deltas closed by the complete response (``stream``). It knows its wire format
and nothing about rate limits, retries or statistics: [`iModel`][pride.iModel]
wraps every endpoint in the same pipeline, the scripted one included.
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any, Protocol

import httpx
import httpx_sse

from ._errors import error_for_status, malformed, translating
from ._types import ModelRequest, ModelResponse

logger = logging.getLogger("pride.llm")

__all__ = [
    "Endpoint",
    "HttpAccess",
    "HttpEndpoint",
    "decode_arguments",
    "json_instruction",
]


class Endpoint(abc.ABC):
    """One way of calling a model (an HTTP API, or a script)."""

    provider: str
    model: str

    @abc.abstractmethod
    async def send(self, request: ModelRequest, options: dict[str, Any]) -> ModelResponse:
        """Make one attempt and return the whole reply.

        Args:
            request: what to ask.
            options: request options, already merged (model's, then the call's).

        Raises:
            ProviderError: a subclass saying what failed (see ``pride.llm._errors``).
        """

    @abc.abstractmethod
    def stream(
        self, request: ModelRequest, options: dict[str, Any]
    ) -> AsyncGenerator[str | ModelResponse, None]:
        """Make one streaming attempt: yield text deltas, then the complete reply last.

        The caller must close the generator (``aclose``), which closes the HTTP
        response; it yields nothing inside a cancel scope.

        Raises:
            ProviderError: as `send`; a stream cut before its end is a
                ``ProviderConnectionError``, an unreadable event a
                ``MalformedResponse``.
        """


class HttpAccess(Protocol):
    """What an HTTP endpoint needs from its model: a client and the key."""

    def http_client(self) -> httpx.AsyncClient:
        """The HTTP client for the current trio run."""
        ...

    def api_key(self) -> str | None:
        """The API key, read now; raises ``AuthenticationFailed`` if required and missing."""
        ...


class HttpEndpoint(Endpoint):
    """Shared HTTP behaviour: POST JSON, read JSON or SSE, translate failures."""

    def __init__(self, *, provider: str, model: str, url: str, access: HttpAccess) -> None:
        self.provider = provider
        self.model = model
        self.url = url
        self._access = access
        self._headers_key: str | None = None
        self._headers: dict[str, str] = self.auth_headers(None)

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Request headers carrying ``key`` (``Authorization: Bearer`` by default)."""
        return {"authorization": f"Bearer {key}"} if key else {}

    def _current_headers(self) -> tuple[dict[str, str], str | None]:
        key = self._access.api_key()
        if key != self._headers_key:
            self._headers = self.auth_headers(key)
            self._headers_key = key
        return self._headers, key

    async def post_json(self, payload: dict[str, Any]) -> Any:
        """POST ``payload`` and return the decoded JSON reply.

        Raises:
            ProviderError: a subclass for an error status, a transport failure
                or a body that is not JSON.
        """
        headers, key = self._current_headers()
        client = self._access.http_client()
        with translating(self.provider, key):
            response = await client.post(self.url, json=payload, headers=headers)
        if response.status_code >= 400:
            raise error_for_status(
                response.status_code,
                response.content,
                response.headers,
                provider=self.provider,
                secret=key,
            )
        try:
            return json.loads(response.content)
        except ValueError as exc:
            raise malformed(self.provider, "the response is not JSON", exc) from exc

    async def post_sse(
        self, payload: dict[str, Any]
    ) -> AsyncGenerator[httpx_sse.ServerSentEvent, None]:
        """POST ``payload`` and yield the server-sent events of the reply.

        The caller must close the generator; closing it closes the response.
        """
        headers, key = self._current_headers()
        client = self._access.http_client()
        headers = {**headers, "accept": "text/event-stream"}
        with translating(self.provider, key):
            async with client.stream("POST", self.url, json=payload, headers=headers) as response:
                if response.status_code >= 400:
                    body = await response.aread()
                    raise error_for_status(
                        response.status_code,
                        body,
                        response.headers,
                        provider=self.provider,
                        secret=key,
                    )
                events = httpx_sse.EventSource(response).aiter_sse()
                finished = False
                try:
                    async for event in events:
                        yield event
                    finished = True
                finally:
                    if not finished:
                        await _close_early(response, events)


async def _close_early(
    response: httpx.Response, events: AsyncGenerator[httpx_sse.ServerSentEvent, None]
) -> None:
    """Close a half-read event stream so that no async generator is left behind.

    httpx and httpx-sse read a body through a chain of async generators that
    do not close the ones they iterate, so closing only the outermost leaves
    the inner ones to the garbage collector, and trio warns about each. So the
    response is closed first (dropping the connection at once), and the event
    iterator is then run to its end: the read on the closed connection fails
    and every layer finishes by that exception.
    """
    await response.aclose()
    try:
        async for _ in events:
            pass
    except Exception as exc:  # the expected end of a read on a closed response
        logger.debug("closing an SSE stream early ended its read with %r", exc)
    await events.aclose()


def loads_event(provider: str, data: str) -> Any:
    """Decode one SSE ``data`` field as JSON, or raise ``MalformedResponse``."""
    try:
        return json.loads(data)
    except ValueError as exc:
        raise malformed(provider, "a stream event is not JSON", exc) from exc


def decode_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Decode tool-call arguments (a JSON string or an object) into a dict.

    Returns ``(arguments, error)``: on failure ``({}, reason)``; empty input is ``{}``.
    """
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        return {}, f"tool arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def json_instruction(response_format: dict[str, Any]) -> str:
    """The system-text instruction used where a provider has no JSON-schema mode."""
    name = response_format.get("name", "response")
    schema = json.dumps(response_format.get("schema", {}), separators=(",", ":"))
    return (
        f"Answer with one JSON object named {name!r} that matches this JSON schema, "
        "in a ```json fenced block, and nothing else.\n"
        f"JSON schema: {schema}"
    )
