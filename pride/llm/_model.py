"""iModel: one configured model, and the pipeline every call goes through.

A call runs: admission by the rate limiter (when limits are set) → attempts
with retries → the endpoint (HTTP or scripted) → usage and statistics. The
HTTP client is created lazily, one per trio run (a client must not cross
event loops), and closed by [`iModel.aclose`][pride.iModel.aclose] or, failing that, when the
run ends.

[`ScriptedModel`][pride.ScriptedModel] lives here too: ``iModel.from_spec("scripted")`` returns
one, and a base class that builds its subclass must not import it from a
module that imports the base (the same arrangement as ``pathlib.Path``, whose
constructor returns a ``PosixPath`` defined beside it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from functools import partial
from types import TracebackType
from typing import Any, Self

import attrs
import httpx

from pride.errors import ProviderError
from pride.messages import Usage

from ._attempts import send_with_retries, stream_with_retries
from ._client import RunClient
from ._endpoint import Endpoint, StreamItem
from ._key import ApiKey
from ._ledger import CallLedger
from ._limiter import RateLimiter
from ._pricing import priced
from ._providers import ProviderInfo, default_model_spec, provider_info, split_model
from ._reading import Deadline, Exchange, ResponseLimits
from ._retry import RetryNotice, RetryPolicy
from ._script import DEFAULT_CHUNK_SIZE, KEEP_CALLS, Script, ScriptedEndpoint
from ._stream import ModelStream
from ._tokens import estimate_request_tokens
from ._types import ModelRequest, ModelResponse, ModelStatistics
from ._wires import http_endpoint, model_options, openai_api_for

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "ScriptedModel",
    "default_chat_model",
    "iModel",
]

logger = logging.getLogger("pride.llm")

#: Seconds allowed for each network operation (connect, write, each read, pool wait).
DEFAULT_TIMEOUT = 120.0

#: Seconds allowed for a whole call: every attempt, every backoff, the whole
#: reply or stream (the official OpenAI and Anthropic SDKs' ten minutes).
DEFAULT_CALL_TIMEOUT = 600.0

#: Called with a [`RetryNotice`][pride.llm.RetryNotice] before each retry of a call.
OnRetryNotice = Callable[[RetryNotice], None]

#: The keyword options every model kind takes, beside where the model is and its key.
_SETTINGS = (
    "openai_api",
    "timeout",
    "call_timeout",
    "response_limits",
    "limit_requests",
    "limit_tokens",
    "queue_capacity",
    "capacity_refresh_time",
    "concurrency_limit",
    "retry",
    "on_retry",
)

#: The fields ``from_dict`` accepts (``on_retry`` is code, never data).
_SPEC_KEYS = frozenset(
    {"provider", "model", "base_url", "api_key", "request_options", *_SETTINGS} - {"on_retry"}
)


class iModel:
    """A chat model: where it is, how to authenticate, limits, retries, options.

    Args:
        model: ``"provider/model"`` (``"openai/gpt-4.1-mini"``) or a bare model
            name (OpenAI); ``None`` uses ``$PRIDE_CHAT_MODEL`` or
            ``"openai/gpt-4.1-mini"``.
        provider: the provider, when ``model`` does not start with it.
        base_url: the API root; required for vLLM and unknown providers (which
            are then spoken to as OpenAI-compatible servers).
        openai_api: an OpenAI-format model's wire, ``"chat_completions"`` or
            ``"responses"``; ``None``: Responses for OpenAI's reasoning models.
        api_key: the key; by default read at each call from the provider's
            environment variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
            ...). Never serialised, logged or shown.
        timeout: seconds for each network operation (connect, write, each
            read: the longest silence allowed); ``None`` disables.
        call_timeout: seconds for the whole call, from its admission by the
            rate limiter: every attempt, every backoff sleep, and the whole
            reply, or the whole stream until its last event (however slowly
            its bytes trickle in); past it the call fails with
            ``ProviderTimeout``. ``None`` disables.
        response_limits: bounds on what is read of a reply (body, each stream
            event, a whole stream); ``None``: [`ResponseLimits`][pride.llm.ResponseLimits] defaults.
        limit_requests: requests per window (``None``: no limit).
        limit_tokens: estimated tokens per window (``None``: no limit).
        queue_capacity: waiting calls counted as queued; callers beyond wait
            for a place. Nothing is ever failed for being over the rate.
        capacity_refresh_time: window length in seconds.
        concurrency_limit: calls in flight at once (``None``: no limit).
        retry: the [`RetryPolicy`][pride.llm.RetryPolicy] (``None``: the default policy).
        on_retry: called with a [`RetryNotice`][pride.llm.RetryNotice] (status, retry number,
            delay) before each retry, e.g. to tell a user why a reply is late;
            an exception it raises is logged and ignored. Not serialised.
        **request_options: sent with every request (``temperature``,
            ``max_tokens``, ...); a request's own ``options`` override them.
            Checked here: ``reasoning_effort``, ``reasoning_summary``, ``thinking=4096``
            (Anthropic's thinking) and ``prompt_cache`` (Anthropic's cache breakpoints).

    Raises:
        ValueError: unknown provider without ``base_url``, a bad limit or option.

    Use ``async with iModel(...) as model:`` (or ``await model.aclose()``) to
    close its HTTP connections deterministically.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        openai_api: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        response_limits: ResponseLimits | None = None,
        limit_requests: int | None = None,
        limit_tokens: int | None = None,
        queue_capacity: int = 100,
        capacity_refresh_time: float = 60.0,
        concurrency_limit: int | None = None,
        retry: RetryPolicy | None = None,
        on_retry: OnRetryNotice | None = None,
        **request_options: Any,
    ) -> None:
        if call_timeout is not None and not call_timeout > 0:
            raise ValueError(f"call_timeout must be > 0 seconds or None, got {call_timeout!r}")
        provider_name, model_name = split_model(model, provider, base_url)
        info = provider_info(provider_name, base_url)
        if not model_name:
            raise ValueError(f"no model name given for provider {provider_name!r}")
        self.provider = provider_name
        self.model = model_name
        self.base_url = base_url or info.base_url
        self.api_format = info.api_format
        self.supports_native_tools = info.native_tools
        self.supports_structured_output = info.structured_output
        self.openai_api = openai_api_for(info, model_name, openai_api, request_options)
        self.request_options: dict[str, Any] = model_options(info, request_options)
        self.timeout = timeout
        self.call_timeout = call_timeout
        self.response_limits = response_limits if response_limits is not None else ResponseLimits()
        self.retry = retry if retry is not None else RetryPolicy()
        self.on_retry = on_retry
        self.limit_requests = limit_requests
        self.limit_tokens = limit_tokens
        self.queue_capacity = queue_capacity
        self.capacity_refresh_time = capacity_refresh_time
        self.concurrency_limit = concurrency_limit
        limiter = RateLimiter.when_limited(
            limit_requests=limit_requests,
            limit_tokens=limit_tokens,
            capacity_refresh_time=capacity_refresh_time,
            concurrency_limit=concurrency_limit,
            queue_capacity=queue_capacity,
        )
        self._key = ApiKey(api_key, info.key_env, info.key_required)
        self._http = RunClient(timeout, f"{self.provider}/{self.model}")
        self._ledger = CallLedger(limiter)
        self._endpoint = self._make_endpoint(info)
        #: What identifies this model's endpoint as the producer of reasoning
        #: (`Reasoning.origin`): its provider and the URL it calls, credentials and
        #: query left out. Its requests are sent only the reasoning this endpoint
        #: produced. An attribute, read once: every request reads it.
        self.reasoning_origin: str = self._endpoint.origin

    def _make_endpoint(self, info: ProviderInfo) -> Endpoint:
        if info.name == "scripted":
            # Nobody can read this endpoint's record of requests: keep none.
            return ScriptedEndpoint(None, model=self.model, calls=[], keep_calls=0)
        return http_endpoint(
            info,
            self.openai_api,
            model=self.model,
            base_url=self.base_url,
            access=self,
            limits=self.response_limits,
        )

    # -- credentials and the HTTP client ----------------------------------------------

    @property
    def key_env(self) -> str | None:
        """The environment variable this model reads its API key from (``None``
        for providers that take no key, such as the scripted model)."""
        return self._key.env or None

    def api_key(self) -> str | None:
        """The API key for this call: the explicit one, else the environment's.

        Raises:
            AuthenticationFailed: the provider needs a key and none is set; the
                message names the environment variable to set.
        """
        url = self._endpoint.public_url if self._endpoint.public_url else self.base_url
        return self._key.read(self.provider, url)

    def http_client(self) -> httpx.AsyncClient:
        """The HTTP client of the current trio run, created on first use.

        A client from an earlier run is never reused (its connections belong
        to that run's event loop); it was closed when that run ended.
        """
        return self._http.get()

    async def aclose(self) -> None:
        """Close this run's HTTP connections; the model stays usable (it reconnects).

        Cancellation: closing is shielded; it does not wait on the network.
        """
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the call pipeline ----------------------------------------------------------

    def _options(self, request: ModelRequest) -> dict[str, Any]:
        if request.options:
            return {**self.request_options, **request.options}
        return self.request_options

    def _on_retry(self, error: ProviderError, retry: int, delay: float) -> None:
        self._ledger.record_retry(
            RetryNotice(
                provider=self.provider,
                model=self.model,
                url=self._endpoint.public_url,
                error=error,
                status=error.status,
                retry=retry,
                max_retries=self.retry.max_retries,
                delay=delay,
            ),
            self.on_retry,
        )

    async def invoke(
        self, request: ModelRequest, *, spent: Callable[[Usage], None] | None = None
    ) -> ModelResponse:
        """Call the model once (with retries) and return its complete reply.

        Args:
            request: what to ask, in this model's ``api_format``.
            spent: told what a call that ends without a reply spent, before
                its exception leaves (it must not raise): see below.

        Returns:
            the normalised reply.

        Raises:
            ProviderError: a subclass saying what failed, after retries:
                ``RateLimited``, ``ServerError``, ``ProviderConnectionError``,
                ``ProviderTimeout`` (retried first; also when ``call_timeout``
                runs out), ``AuthenticationFailed``, ``EndpointNotFound``,
                ``BadRequest``, ``MalformedResponse`` (``ResponseTooLarge``),
                ``ScriptExhausted``.

        Cancellation: a call waiting for admission leaves the queue; a call in
        flight has its HTTP request aborted; a backoff sleep ends. Nothing is
        retried after cancellation.

        What a call without a reply spent: once a request was sent (its body
        written whole, as httpcore reports it) and not refused
        with an error status, the provider read its prompt and bills it, reply
        or not. A call cancelled, timed out or failed after that counts the
        request's tokens in (pride's estimate, priced at the model's price when
        pride has one) on this model's statistics and limiter, and tells
        ``spent``: once for the call, however many attempts were sent. A call
        that gets its reply counts only the reply's usage, retried or not; one
        that never sent its request (a refused connection) counts nothing.
        """
        options = self._options(request)  # before the ledger: this module's work in one go
        ledger = self._ledger
        estimate = await ledger.admit(request)
        exchange = Exchange()
        try:
            response = await send_with_retries(
                self._endpoint,
                request,
                options,
                self.retry,
                on_retry=self._on_retry,
                deadline=Deadline.after(self.call_timeout),
                exchange=exchange,
            )
        except BaseException as exc:
            unanswered = self._unanswered(request) if exchange.sent else None
            ledger.settle(estimate, unanswered, failed=isinstance(exc, Exception))
            if unanswered is not None and spent is not None:
                spent(unanswered)
            raise
        ledger.settle(estimate, response.usage, failed=False)
        return response

    def _unanswered(self, request: ModelRequest) -> Usage:
        """What a sent request that got no reply spent: its prompt, estimated and priced."""
        return priced(
            self.provider, self.model, Usage(input_tokens=estimate_request_tokens(request))
        )

    def stream(
        self, request: ModelRequest, *, on_output: Callable[[str], None] | None = None
    ) -> ModelStream:
        """Stream the reply: ``async with model.stream(request) as s: async for delta in s``.

        Args:
            request: what to ask, in this model's ``api_format``.
            on_output: told the text of each piece of output the stream reads,
                tool-call arguments included; what it raises cuts the stream.

        See [`ModelStream`][pride.llm.ModelStream] for retries, cancellation,
        ``on_output`` and ``s.response``.
        """
        return ModelStream(
            self._ledger,
            request,
            partial(self._attempts, request),
            self.provider,
            self.model,
            on_output=on_output,
        )

    def _attempts(
        self, request: ModelRequest, exchange: Exchange
    ) -> AsyncGenerator[StreamItem, None]:
        """The deltas, then the reply, with retries until a delta went out.

        Called once the stream is admitted, so the call's deadline starts then.
        """
        return stream_with_retries(
            self._endpoint,
            request,
            self._options(request),
            self.retry,
            on_retry=self._on_retry,
            deadline=Deadline.after(self.call_timeout),
            exchange=exchange,
        )

    # -- introspection and serialisation ----------------------------------------------

    def statistics(self) -> ModelStatistics:
        """A snapshot of this model's counters and summed usage."""
        return self._ledger.statistics()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r}, "
            f"base_url={self.base_url!r}, api_key={self._key.describe()})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data; the API key is never included."""
        settings = self._settings()
        del settings["on_retry"]  # code, not configuration
        settings["retry"] = attrs.asdict(self.retry)
        settings["response_limits"] = attrs.asdict(self.response_limits)
        data = {"provider": self.provider, "model": self.model, "base_url": self.base_url}
        return {**data, **settings, "request_options": dict(self.request_options)}

    def _settings(self) -> dict[str, Any]:
        """The keyword options shared by every model kind (without request options)."""
        return {name: getattr(self, name) for name in _SETTINGS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> iModel:
        """Build a model from [`to_dict`][pride.iModel.to_dict] output (``data`` is not
        modified).

        A ``"scripted"`` provider gives an echo [`ScriptedModel`][pride.ScriptedModel]. An
        ``api_key`` entry is accepted (``to_dict`` never writes one).

        Raises:
            ValueError: unknown keys, or a bad configuration.
        """
        unknown = set(data) - _SPEC_KEYS
        if unknown:
            raise ValueError(f"unknown iModel fields: {', '.join(sorted(unknown))}")
        kwargs = {k: v for k, v in data.items() if k != "request_options"}
        retry = data.get("retry")
        if isinstance(retry, dict):
            kwargs["retry"] = RetryPolicy(**retry)
        limits = data.get("response_limits")
        if isinstance(limits, dict):
            kwargs["response_limits"] = ResponseLimits(**limits)
        options = dict(data.get("request_options") or {})
        if data.get("provider") == "scripted":
            return ScriptedModel(model=str(data.get("model") or "scripted"))
        return iModel(**kwargs, **options)

    @classmethod
    def from_spec(cls, spec: iModel | str | dict[str, Any] | None) -> iModel:
        """A model from an instance (returned as is), a model string, a dict, or ``None``.

        ``None`` gives [`default_chat_model`][pride.llm.default_chat_model]; ``"scripted"`` (or
        ``"scripted/<name>"``) an echo [`ScriptedModel`][pride.ScriptedModel].

        Raises:
            TypeError: ``spec`` is of another type.
        """
        if spec is None:
            return default_chat_model()
        if isinstance(spec, iModel):
            return spec
        if isinstance(spec, str):
            head, _, rest = spec.partition("/")
            if head == "scripted":
                return ScriptedModel(model=rest or "scripted")
            return iModel(spec)
        if isinstance(spec, dict):
            return cls.from_dict(spec)
        raise TypeError(f"cannot make a model from {type(spec).__name__}")

    def copy(self) -> iModel:
        """A new model with this configuration and key, and its own client, limits and counters."""
        twin = iModel.from_dict(self.to_dict())
        twin._key = self._key
        twin.on_retry = self.on_retry
        return twin


class ScriptedModel(iModel):
    """A key-less model that replies from a script, through the real pipeline.

    Calls go through the same rate limiter, retries, usage accounting and
    statistics as HTTP models; only the reply is scripted. It is the embedded
    default for demos (``ScriptedModel()`` echoes) and for tests.

    Args:
        replies: a list whose items are used one per call, in order: a ``str``
            (text), a [`ToolCall`][pride.llm.ToolCall] or a list of them, a
            [`ScriptedReply`][pride.llm.ScriptedReply], or an exception instance (raised for that
            call, so ``RateLimited(...)`` is retried like a real 429); items
            appended to the list later are used too. Or a function, sync or
            async, receiving the [`ModelRequest`][pride.llm.ModelRequest] and returning one of
            those. ``None`` echoes the last user message (``"echo: ..."``).
        delay: seconds (``trio.sleep``, so ``MockClock`` applies) before each reply.
        chunk_size: characters per text delta when streamed.
        model: the model name reported in responses.
        keep_calls: how many of the latest requests ``calls`` keeps
            (default [`KEEP_CALLS`][pride.llm.KEEP_CALLS], 100; 0: none).
        **options: the [`iModel`][pride.llm.iModel] keyword options (``timeout``, the
            limits, ``retry``, ``on_retry``) and request options, as ``iModel``
            takes them; ``call_timeout`` is ``None`` unless given (a script is
            the application's own code; give one to test deadline handling).

    Attributes:
        calls: the [`ModelRequest`][pride.llm.ModelRequest] objects received, one per attempt, in
            order: the last ``keep_calls`` of them (the older ones let go), so a
            long-running scripted process does not grow with every turn; each
            kept request holds the conversation it was sent. ``keep_calls=0``
            records none. A plain list: clearing it is fine.
        received: how many requests were received in all (one per attempt),
            kept or not.

    A list that runs out raises [`ScriptExhausted`][pride.ScriptExhausted], saying
    how many replies it had and which call this was. Usage is estimated at
    about four characters per token when a reply does not carry its own.
    """

    def __init__(
        self,
        replies: Script = None,
        *,
        delay: float = 0.0,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        model: str = "scripted",
        keep_calls: int = KEEP_CALLS,
        **options: Any,
    ) -> None:
        self.calls: list[ModelRequest] = []
        self._keep_calls = keep_calls
        self._script = replies
        self._delay = delay
        self._chunk_size = chunk_size
        # A script is the application's own code, not a provider to be wary of.
        options.setdefault("call_timeout", None)
        super().__init__(model, provider="scripted", **options)

    def _make_endpoint(self, info: ProviderInfo) -> Endpoint:
        return ScriptedEndpoint(
            self._script,
            model=self.model,
            delay=self._delay,
            chunk_size=self._chunk_size,
            calls=self.calls,
            keep_calls=self._keep_calls,
        )

    @property
    def received(self) -> int:
        """Requests received in all (one per attempt); ``calls`` keeps the latest."""
        endpoint = self._endpoint
        assert isinstance(endpoint, ScriptedEndpoint)
        return endpoint.received

    def to_dict(self) -> dict[str, Any]:
        """``{"provider": "scripted", "model": ...}``; a script is code, not data."""
        return {"provider": "scripted", "model": self.model}

    def copy(self) -> ScriptedModel:
        """A new model with the same script (from its start), options and limits."""
        script = self._script
        if isinstance(script, list):
            script = list(script)
        return ScriptedModel(
            script,
            delay=self._delay,
            chunk_size=self._chunk_size,
            model=self.model,
            keep_calls=self._keep_calls,
            **self._settings(),
            **self.request_options,
        )


def default_chat_model() -> iModel:
    """The default chat model: ``$PRIDE_CHAT_MODEL``, else ``"openai/gpt-4.1-mini"``.

    ``PRIDE_CHAT_MODEL=scripted`` gives the key-less echo model, handy for demos.
    """
    return iModel.from_spec(default_model_spec())
