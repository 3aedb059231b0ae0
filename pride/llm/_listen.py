"""Retry listeners: who hears about the retries of the calls made in one context.

A model's own ``on_retry`` callback belongs to whoever configured the model
and hears every call's retries. A listener belongs to one piece of work: the
calls made inside ``with retry_listener(callback):`` (in that task, and in
tasks it starts, which copy its context) tell ``callback`` about their
retries, and nobody else's. A trace span of one model call uses this to
record that call's retries as events, whatever the model is shared with.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from types import TracebackType

from ._retry import RetryNotice

__all__ = ["RetryListener", "notify_listeners", "retry_listener"]

logger = logging.getLogger("pride.llm")

RetryListener = Callable[[RetryNotice], None]

_listeners: contextvars.ContextVar[tuple[RetryListener, ...]] = contextvars.ContextVar(
    "pride_retry_listeners", default=()
)


class retry_listener:
    """``with retry_listener(callback):`` tells ``callback`` about every retry of a
    model call made inside the block (before the retry's wait).

    Listeners nest (an inner block adds to the outer ones). A listener that
    raises is logged and ignored: observing a call must not break it.
    """

    __slots__ = ("_callback", "_token")

    def __init__(self, callback: RetryListener) -> None:
        self._callback = callback
        self._token: contextvars.Token[tuple[RetryListener, ...]] | None = None

    def __enter__(self) -> retry_listener:
        self._token = _listeners.set((*_listeners.get(), self._callback))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _listeners.reset(self._token)
            self._token = None


def notify_listeners(notice: RetryNotice) -> None:
    """Tell the listeners of the current context about ``notice``."""
    for listener in _listeners.get():
        try:
            listener(notice)
        except Exception:
            logger.exception("%s/%s: a retry listener failed", notice.provider, notice.model)
