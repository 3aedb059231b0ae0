"""The observer: signal dispatch to subscribers.

A session owns one [`Observer`][pride.Observer] and attaches it to every member branch;
a standalone branch can take one too (``Branch(observer=Observer())``). It
implements the branch's ``SignalSink`` protocol:
[`Observer.dispatch`][pride.supervisors.observer.Observer.dispatch]
runs synchronous handlers at once and hands back one awaitable for the
asynchronous ones, which the branch's turn driver drains before the turn's
terminal signal, so a subscriber sees each turn's ``RunStart``,
its ``MessageAdded`` signals and then exactly one ``RunEnd``/``RunFailed``.

Subscribers never break what they watch: a raising handler (or predicate)
is logged to ``pride.observer`` and the others still run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

import attrs
import trio

from ..messages import Signal

__all__ = ["Filter", "Handler", "Observer"]

log = logging.getLogger("pride.observer")

Filter = type | tuple[type, ...] | Callable[[Signal], bool]
"""A signal class (``isinstance``), a tuple of classes, or a predicate.

The classes given to one ``observe`` call (alone or in tuples) are
alternatives: any of them matches. Every predicate must hold."""

Handler = Callable[[Signal], Any]
"""Called with each matching signal; may be sync or async (returning an awaitable)."""

_H = TypeVar("_H", bound=Handler)


@attrs.frozen
class _Subscription:
    handler: Handler
    types: tuple[type, ...]  # alternatives: any one matches (isinstance); empty: every signal
    predicates: tuple[Callable[[Signal], bool], ...]  # every one must hold

    def matches(self, signal: Signal) -> bool:
        if self.types and not isinstance(signal, self.types):
            return False
        for predicate in self.predicates:
            try:
                if not predicate(signal):
                    return False
            except Exception:
                log.exception(
                    "observer predicate %r failed on %s; treated as no match",
                    predicate,
                    type(signal).__name__,
                )
                return False
        return True


class Observer:
    """Subscribers per signal type or predicate, dispatched in subscription order.

    Usage:

    ```python
    observer = Observer()
    observer.observe(RunEnd, handler=print)

    @observer.observe(MessageAdded, lambda s: s.message.role == "assistant")
    async def store(signal): ...
    ```

    A session's ``observe``/``unobserve`` are this class's.
    """

    __slots__ = ("_forward", "_subscriptions", "_wanted")

    def __init__(self) -> None:
        # Copy-on-write: dispatch iterates a tuple, so a handler that
        # subscribes or unsubscribes while a signal is being dispatched
        # changes only what later signals see.
        self._subscriptions: tuple[_Subscription, ...] = ()
        # A parent session's observer: a child session's signals go up the tree.
        self._forward: Any = None
        # wants(kind), per signal class, until the subscriptions change.
        self._wanted: dict[type, bool] = {}

    def __repr__(self) -> str:
        return f"<Observer {len(self._subscriptions)} subscriptions>"

    def __len__(self) -> int:
        return len(self._subscriptions)

    @property
    def idle(self) -> bool:
        """True when no signal would reach anyone (no subscription here or up the
        tree): a producer may skip making signals nobody sees."""
        if self._subscriptions:
            return False
        forward = self._forward
        return forward is None or bool(getattr(forward, "idle", False))

    @overload
    def observe(self, *filters: Filter, handler: None = None) -> Callable[[_H], _H]: ...

    @overload
    def observe(self, *filters: Filter, handler: _H) -> _H: ...

    def observe(self, *filters: Filter, handler: Handler | None = None) -> Any:
        """Subscribe ``handler`` to the signals the filters select.

        The signal classes given (each alone or in a tuple) are alternatives:
        ``observe(RunEnd, RunFailed, handler=h)`` sees both terminals.
        Predicates all have to hold. Classes and predicates together mean
        (any of the classes) and (every predicate). With no filters the
        handler sees every signal. Without ``handler`` this returns a
        decorator that subscribes the function it decorates.

        Args:
            *filters: signal classes (``isinstance``), tuples of classes,
                or predicates ``(signal) -> bool``.
            handler: ``handler(signal)``, sync or async.

        Returns:
            ``handler`` (so the decorator form leaves the function usable).

        Raises:
            TypeError: a filter is neither a class, a tuple of classes nor a
                callable, or ``handler`` is not callable.
        """
        types: list[type] = []
        predicates: list[Callable[[Signal], bool]] = []
        for item in filters:
            if isinstance(item, type):
                types.append(item)
            elif isinstance(item, tuple) and item and all(isinstance(c, type) for c in item):
                types.extend(item)
            elif callable(item):
                predicates.append(item)
            else:
                raise TypeError(f"observe() filters are signal classes or predicates, got {item!r}")

        def subscribe(function: _H) -> _H:
            if not callable(function):
                raise TypeError(f"observer handler must be callable, got {function!r}")
            subscription = _Subscription(function, tuple(types), tuple(predicates))
            self._subscriptions = (*self._subscriptions, subscription)
            self._wanted = {}
            return function

        if handler is None:
            return subscribe
        return subscribe(handler)

    def unobserve(self, handler: Handler) -> int:
        """Remove every subscription of ``handler``; return how many there were."""
        kept = tuple(s for s in self._subscriptions if s.handler != handler)
        removed = len(self._subscriptions) - len(kept)
        self._subscriptions = kept
        self._wanted = {}
        return removed

    def wants(self, kind: type) -> bool:
        """Whether a signal of class ``kind`` could reach any subscriber (here or up
        the tree): False means dispatching one would do nothing.

        A branch asks before building a signal, so a turn nobody watches makes
        none. A subscription whose classes admit ``kind`` (or that names no
        class) counts, whatever its predicates would say.
        """
        wanted = self._wanted.get(kind)
        if wanted is None:
            wanted = self._wanted[kind] = any(
                not s.types or issubclass(kind, s.types) for s in self._subscriptions
            )
        if wanted:
            return True
        forward = self._forward
        return forward is not None and bool(forward.wants(kind))

    def dispatch(self, signal: Signal) -> Awaitable[None] | None:
        """Deliver ``signal`` to each matching subscriber, in subscription order.

        Synchronous handlers run now; a failure is logged and the next
        handler still runs. Handlers that return an awaitable are collected.

        Returns:
            None when no asynchronous handler matched; otherwise one awaitable
            that runs them concurrently (started in subscription order), each
            isolated: a failure is logged, never raised. Never raises itself.
        """
        pending: list[tuple[Handler, Awaitable[Any]]] | None = None
        for subscription in self._subscriptions:
            if not subscription.matches(signal):
                continue
            handler = subscription.handler
            try:
                result = handler(signal)
            except Exception:
                log.exception("observer %r failed on %s", handler, type(signal).__name__)
                continue
            if result is not None and inspect.isawaitable(result):
                if pending is None:
                    pending = []
                pending.append((handler, result))
        forward = self._forward
        if forward is not None:
            try:
                above = forward.dispatch(signal)
            except Exception:
                log.exception("parent observer failed on %s", type(signal).__name__)
            else:
                if above is not None:
                    if pending is None:
                        pending = []
                    pending.append((forward.dispatch, above))
        if pending is None:
            return None
        return _run_pending(pending, type(signal).__name__)


async def _run_pending(pending: list[tuple[Handler, Awaitable[Any]]], kind: str) -> None:
    if len(pending) == 1:
        await _isolated(*pending[0], kind)
        return
    async with trio.open_nursery() as nursery:
        for handler, awaitable in pending:
            nursery.start_soon(_isolated, handler, awaitable, kind)


async def _isolated(handler: Handler, awaitable: Awaitable[Any], kind: str) -> None:
    try:
        await awaitable
    except Exception:
        log.exception("async observer %r failed on %s", handler, kind)
