"""ModelStream: one streamed model call, as an async context manager and iterator."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from types import TracebackType

import trio

from pride.messages import Usage

from ._endpoint import Delta, Generated, Reported, StreamItem
from ._errors import malformed
from ._ledger import CallLedger
from ._pricing import priced
from ._reading import Exchange
from ._tokens import estimate_request_tokens, estimate_text_tokens
from ._types import ModelRequest, ModelResponse

#: Starts a call's attempts once it is admitted: deltas, then the reply last; the
#: `Exchange` is told whether a request reached the provider.
StartAttempts = Callable[[Exchange], AsyncGenerator[StreamItem, None]]

logger = logging.getLogger("pride.llm")

__all__ = ["STREAM_CLOSE_TIMEOUT", "ModelStream", "StartAttempts"]

#: Seconds allowed for closing the HTTP stream when the block is left.
STREAM_CLOSE_TIMEOUT = 5.0


class ModelStream:
    """A streamed reply; get one from [`iModel.stream`][pride.iModel.stream].

    Usage:

    ```python
    async with model.stream(request) as stream:
        async for delta in stream:
            print(delta, end="")
    response = stream.response
    ```

    Entering the block waits for admission by the model's rate limiter (the
    call holds its concurrency slot until the block is left). Iterating yields
    the text deltas (``str``) and, for a model that thinks, the pieces of its
    reasoning as [`ReasoningDelta`][pride.ReasoningDelta] items, never mixed
    into the text; after the last one, [`response`][pride.llm.ModelStream.response] is
    the
    complete [`ModelResponse`][pride.llm.ModelResponse], tool calls and usage included.

    ``on_output`` (given to [`iModel.stream`][pride.iModel.stream]) is told the
    text of each piece of output as it is read, a text or reasoning delta
    before it is handed out and each piece of a tool call's arguments, which
    is never handed out; whatever it raises leaves the iteration at once
    (the piece counted in [`usage`][pride.llm.ModelStream.usage]): the one way a
    caller cuts a stream on what it generated, arguments included (a budget's
    ``max_output_tokens``).

    A failed attempt is retried (per the model's ``RetryPolicy``) only while no
    delta has been delivered; after that a cut stream raises
    ``ProviderConnectionError`` and an unreadable event ``MalformedResponse``.

    Cancellation and early exit: leaving the block for any reason (``break``,
    an exception, cancellation) closes the HTTP response at once, shielded and
    bounded by `STREAM_CLOSE_TIMEOUT` seconds. What a stream left early spent
    is still counted: see [`usage`][pride.llm.ModelStream.usage].
    """

    def __init__(
        self,
        ledger: CallLedger,
        request: ModelRequest,
        start: StartAttempts,
        provider: str,
        model: str,
        *,
        on_output: Callable[[str], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self._on_output = on_output
        self._request = request
        self._start = start
        self._provider = provider
        self._model = model
        self._items: AsyncGenerator[StreamItem, None] | None = None
        self._response: ModelResponse | None = None
        # Every delta handed out and every generated piece read, kept as it came
        # (an append per item): only a stream that ends without its reply
        # measures them (`usage`).
        self._received: list[Delta | Generated] = []
        self._unfinished: Usage | None = None
        # The usage the provider reported before its reply was whole (`Reported`).
        self._reported: Usage | None = None
        self._exchange = Exchange()
        self._state = "new"
        self._estimate = 0
        self._failed = False

    async def __aenter__(self) -> ModelStream:
        if self._state != "new":
            raise RuntimeError("a ModelStream can be entered only once; call model.stream() again")
        self._estimate = await self._ledger.admit(self._request)
        self._state = "open"
        try:
            self._items = self._start(self._exchange)
        except BaseException:
            self._ledger.settle(self._estimate, None, failed=True)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        items, self._items = self._items, None
        self._state = "closed"
        try:
            if items is not None:
                with trio.move_on_after(STREAM_CLOSE_TIMEOUT, shield=True) as scope:
                    await items.aclose()
                if scope.cancelled_caught:
                    logger.warning(
                        "%s: closing a model stream took over %.0f s; abandoned it",
                        self._provider,
                        STREAM_CLOSE_TIMEOUT,
                    )
        finally:
            self._ledger.settle(self._estimate, self.usage, failed=self._failed)

    def __aiter__(self) -> ModelStream:
        return self

    async def __anext__(self) -> Delta:
        items = self._items
        if items is None:
            raise RuntimeError("iterate a ModelStream inside `async with model.stream(...) as s:`")
        if self._response is not None:
            raise StopAsyncIteration
        while True:
            try:
                item = await items.__anext__()
            except StopAsyncIteration:
                self._failed = True
                raise malformed(self._provider, None, "the stream ended without a reply") from None
            except Exception:
                self._failed = True
                raise
            if isinstance(item, Reported):  # counted if the stream is cut, never handed out
                self._reported = item.usage
                self._unfinished = None
                continue
            if isinstance(item, ModelResponse):
                self._response = item
                raise StopAsyncIteration
            self._received.append(item)
            if self._on_output is not None:
                self._on_output(item if isinstance(item, str) else item.text)
            if not isinstance(item, Generated):  # a generated piece is counted, never handed out
                return item

    @property
    def response(self) -> ModelResponse:
        """The complete reply, once the stream has been read to its end.

        Raises:
            RuntimeError: the stream has not been read to its end (yet).
        """
        if self._response is None:
            raise RuntimeError(
                "ModelStream.response is available only after the stream was read to its end"
            )
        return self._response

    @property
    def usage(self) -> Usage | None:
        """What the call has spent: the reply's usage once the stream was read to
        its end, else pride's estimate of what a stream left early, cut or failed
        has spent, or ``None`` while its request has not reached the provider.

        A stream whose provider already reported usage before it was cut
        (Anthropic's ``message_start`` carries the input tokens; a
        chat-completions usage chunk may precede the stream's end) counts the
        provider's input figure instead of the estimate, and the larger of its
        output figure and the estimate of what was received. Those figures were
        checked as a reply's are: a count past the bound fails the stream as a
        `MalformedResponse` and is never counted.

        The provider bills what it read and generated whether anyone read it or
        not, so a stream left once its request was sent counts its prompt (as
        `estimate_request_tokens` measures it) and the deltas received, text and
        reasoning (each as `estimate_text_tokens` measures it, the count a
        budget's ``max_output_tokens`` cuts a stream by), priced at the model's
        price when pride has one. The model's statistics, its rate limiter and
        the turn's budget all count this figure. Sent means the request's body
        was written whole (as httpcore reports it; the scripted model: its script
        gave a reply) and no error status refused it: a stream cancelled while it
        connected, or refused with a 429, counts nothing; one cancelled while the
        model works on its first token counts its prompt.

        The pieces of a tool call's arguments count too, as they are read,
        though no consumer sees them (the call is whole only with the reply): a
        stream cut while the model writes them spent them. So does a piece read
        in an attempt that failed and was retried (nothing had reached the
        consumer): the provider generated it.
        """
        if self._response is not None:
            return self._response.usage
        if not self._received and not self._exchange.sent:
            return None
        if self._unfinished is None or self._state != "closed":  # still growing until closed
            generated = sum(
                estimate_text_tokens(delta if isinstance(delta, str) else delta.text)
                for delta in self._received
            )
            reported = self._reported
            if reported is not None and reported.input_tokens:
                # The provider's own count of the prompt it read: what it bills.
                usage = Usage(
                    input_tokens=reported.input_tokens,
                    output_tokens=max(generated, reported.output_tokens),
                    cached_tokens=reported.cached_tokens,
                    cache_write_tokens=reported.cache_write_tokens,
                    reasoning_tokens=reported.reasoning_tokens,
                )
            else:
                usage = Usage(
                    input_tokens=estimate_request_tokens(self._request), output_tokens=generated
                )
            self._unfinished = priced(self._provider, self._model, usage)
        return self._unfinished
