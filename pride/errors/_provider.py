"""Model providers: every way a call to a model can fail."""

from __future__ import annotations

from ..messages import PrideError

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "EndpointNotFound",
    "MalformedResponse",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "ResponseTooLarge",
    "ScriptExhausted",
    "ServerError",
]


class ProviderError(PrideError):
    """A model provider call failed.

    ``status`` is the HTTP status when there was one; ``provider_message`` the
    provider's own error text; ``url`` the endpoint that was called (scheme,
    host and path only: no credentials, no query). None of them ever contains
    an API key, and the message names the URL and quotes the provider.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider_message: str | None = None,
        provider: str | None = None,
        url: str | None = None,
    ) -> None:
        self.status = status
        self.provider_message = provider_message
        self.provider = provider
        self.url = url
        super().__init__(message)


class ProviderConnectionError(ProviderError):
    """The connection failed or was cut (including mid-stream)."""


class ProviderTimeout(ProviderError):
    """The provider did not answer within the timeout."""


class RateLimited(ProviderError):
    """The provider answered 429. ``retry_after`` is in seconds when it said."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: object) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kw)  # type: ignore[arg-type]


class AuthenticationFailed(ProviderError):
    """The provider rejected the credentials (401/403)."""


class EndpointNotFound(ProviderError):
    """The provider answered 404: nothing at that URL, or no such model.

    The message names the URL that answered; the usual causes are a
    ``base_url`` missing its ``/v1`` (or pointing at the wrong server) and a
    misspelt model name. Not retried.
    """


class BadRequest(ProviderError):
    """The provider rejected the request (4xx other than 401/403/404/408/429)."""


class ServerError(ProviderError):
    """The provider failed on its side (5xx)."""


class MalformedResponse(ProviderError):
    """The provider's reply (JSON or SSE) could not be read.

    ``path`` names the offending value when the reply was JSON of the wrong
    shape (``choices[0].message.tool_calls``; prefixed by ``event 3:`` in a
    stream), else it is ``None``. Not retried: the same request would most
    likely get the same reply.
    """

    def __init__(self, message: str, *, path: str | None = None, **kw: object) -> None:
        self.path = path
        super().__init__(message, **kw)  # type: ignore[arg-type]


class ResponseTooLarge(MalformedResponse):
    """The reply passed a bound of the model's ``ResponseLimits``; reading stopped there.

    ``limit`` names the bound (``"max_body_bytes"``, ``"max_event_bytes"``,
    ``"max_stream_bytes"``) and ``allowed`` its value in bytes.
    """

    def __init__(self, message: str, *, limit: str, allowed: int, **kw: object) -> None:
        self.limit = limit
        self.allowed = allowed
        super().__init__(message, **kw)  # type: ignore[arg-type]


class ScriptExhausted(ProviderError):
    """A ScriptedModel was called more times than it has replies."""
