"""Context providers: ephemeral text injected into one turn's request.

A provider is anything with ``async provide(branch, instruction) -> str | None``.
Before a turn's first model call, the branch's
[`ContextProviderRegistry`][pride.ContextProviderRegistry]
asks every provider, keeps what fits the token budget, and the turn appends
the kept blocks to the system prompt of that turn's requests only. Blocks
are never recorded in the conversation; the turn publishes the registry's
[`ProviderReport`][pride.ProviderReport] as ``branch.last_context_report``.

The rules, exactly:

* providers run one after another, in registration order;
* a provider that raises is logged and listed under ``failed``; the turn
  goes on (``trio.Cancelled`` and other non-``Exception`` errors propagate);
* ``None`` or empty text is no block and is not listed at all;
* a provider's ``max_tokens``, when truthy, skips a longer text (``skipped``);
  ``0`` and ``None`` mean no cap, a negative cap skips every text;
* the remaining texts are admitted against the registry's ``budget`` in
  descending priority (equal priorities in registration order): a text is
  kept when it still fits, otherwise skipped, and a later smaller text may
  still fit;
* kept blocks are rendered in registration order, whatever their priority.

A provider may also have ``async writeback(branch, action_responses)``;
after an ``operate`` turn executed tool calls, `gather_writeback`
calls it (in registration order, failures logged and contained).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from . import _tokens

if TYPE_CHECKING:
    from ..messages import Instruction

__all__ = [
    "DEFAULT_BUDGET",
    "ContextProvider",
    "ContextProviderRegistry",
    "ProviderReport",
]

log = logging.getLogger("pride.context")

# The reference system's value: a hard cap of about 2k tokens on injected text,
# leaving the rest of the window to the conversation. No measurement backs the
# exact number; it is settable per registry.
DEFAULT_BUDGET = 2000
"""Tokens of provider text a registry admits per turn unless told otherwise."""


@runtime_checkable
class ContextProvider(Protocol):
    """Supplies text for one turn's request.

    ``provide`` receives the branch and the turn's new
    [`Instruction`][pride.Instruction] (not yet recorded) and returns text to
    inject, or None for nothing. A provider may also define
    ``async writeback(branch, action_responses) -> None``, called after an
    ``operate`` turn executed tool calls, to persist what it learned.
    """

    async def provide(self, branch: Any, instruction: Instruction) -> str | None:
        """Text for this turn's request, or None."""
        ...


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(value)


def _fired(value: Any) -> tuple[Mapping[str, Any], ...]:
    return tuple(value)


@attrs.frozen
class ProviderReport:
    """What the providers contributed to one turn.

    Attributes:
        blocks: the kept texts, in registration order (what the request got).
        fired: one ``{"provider_name": ..., "tokens": ...}`` per kept block,
            in the same order as ``blocks``.
        skipped: providers whose text did not fit (their ``max_tokens`` or the
            budget), or every provider when the branch had no system message.
        failed: providers that raised (the log has the traceback).
    """

    blocks: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    fired: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=_fired)
    skipped: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    failed: tuple[str, ...] = attrs.field(default=(), converter=_strings)


@attrs.frozen
class _Entry:
    provider: Any
    priority: int
    max_tokens: int | None
    name: str


@attrs.frozen
class _Output:
    index: int
    entry: _Entry
    text: str
    tokens: int


def _check_int(value: Any, what: str, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an int or None" if optional else "an int"
        raise TypeError(f"{what} must be {kind}, got {value!r}")


class ContextProviderRegistry:
    """A branch's context providers, in registration order, with a token budget.

    ``branch.providers`` creates one on first access. It is falsy while empty,
    so a branch that never registers a provider pays nothing per turn.

    Args:
        budget: tokens of provider text admitted per turn (default 2,000).
            A non-positive budget admits no text.
        tokenizer: counts a text's tokens; default: tiktoken when installed
            and loadable offline, else ``ceil(len(text) / 4)`` (see
            `count_tokens`). A count that raises or is not a non-negative
            int is logged and replaced by the character estimate.

    Raises:
        TypeError: ``budget`` is not an int or ``tokenizer`` not callable.
    """

    __slots__ = ("_budget", "_entries", "_tokenizer")

    def __init__(
        self, budget: int = DEFAULT_BUDGET, *, tokenizer: Callable[[str], int] | None = None
    ) -> None:
        _check_int(budget, "budget")
        if tokenizer is not None and not callable(tokenizer):
            raise TypeError(f"tokenizer must be callable, got {type(tokenizer).__name__}")
        self._budget = budget
        self._tokenizer = tokenizer
        self._entries: list[_Entry] = []

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __iter__(self) -> Iterator[Any]:
        return iter([entry.provider for entry in self._entries])

    def __repr__(self) -> str:
        return f"<ContextProviderRegistry {self.names} budget={self._budget}>"

    @property
    def budget(self) -> int:
        """Tokens of provider text admitted per turn; settable."""
        return self._budget

    @budget.setter
    def budget(self, value: int) -> None:
        _check_int(value, "budget")
        self._budget = value

    @property
    def names(self) -> list[str]:
        """The providers' names in registration order (a new list)."""
        return [entry.name for entry in self._entries]

    def register(
        self,
        provider: ContextProvider,
        *,
        priority: int = 0,
        max_tokens: int | None = None,
        name: str | None = None,
    ) -> None:
        """Add ``provider`` after those already registered.

        Args:
            provider: an object with ``async provide(branch, instruction)``.
            priority: higher is admitted first when the budget is tight.
            max_tokens: a cap on this provider's text; a longer text is
                skipped whole (never truncated). ``None`` or ``0``: no cap.
            name: its name in reports; default: the provider's ``name``
                attribute when it is a non-empty string, else its class name.
                Names need not be unique.

        Raises:
            TypeError: ``provider`` has no callable ``provide``, or
                ``priority``/``max_tokens``/``name`` has the wrong type.
        """
        if not callable(getattr(provider, "provide", None)):
            raise TypeError(
                f"a context provider needs an async provide(branch, instruction) method; "
                f"{type(provider).__name__} has none"
            )
        _check_int(priority, "priority")
        _check_int(max_tokens, "max_tokens", optional=True)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str or None, got {type(name).__name__}")
        self._entries.append(
            _Entry(provider, priority, max_tokens, name or _default_name(provider))
        )

    def unregister(self, name: str) -> None:
        """Remove every provider registered under ``name``.

        Raises:
            KeyError: no provider has that name.
        """
        kept = [entry for entry in self._entries if entry.name != name]
        if len(kept) == len(self._entries):
            raise KeyError(f"no context provider named {name!r} (registered: {self.names})")
        self._entries = kept

    def skipped_report(self) -> ProviderReport:
        """The report of a turn that could not use providers: every name under ``skipped``."""
        return ProviderReport(skipped=self.names)

    async def gather(self, branch: Any, instruction: Instruction) -> ProviderReport:
        """Ask every provider for this turn's text and keep what fits (see the module rules).

        Returns:
            the report: kept blocks, fired, skipped and failed providers.

        Raises:
            BaseException: only what is not an ``Exception`` (``trio.Cancelled``,
                ``KeyboardInterrupt``); every provider error is contained.

        Cancellation: propagates from the provider being awaited; nothing is kept.
        """
        entries = list(self._entries)
        outputs: list[_Output] = []
        skipped: list[str] = []
        failed: list[str] = []
        for index, entry in enumerate(entries):
            try:
                pending = entry.provider.provide(branch, instruction)
                if not inspect.isawaitable(pending):
                    raise TypeError(
                        f"provide() returned {type(pending).__name__}; it must be an async method"
                    )
                text = await pending
            except Exception:
                log.warning(
                    "context provider %r failed; continuing without it", entry.name, exc_info=True
                )
                failed.append(entry.name)
                continue
            if not text:
                continue
            if not isinstance(text, str):
                log.warning(
                    "context provider %r returned %s, not str or None; ignoring it",
                    entry.name,
                    type(text).__name__,
                )
                failed.append(entry.name)
                continue
            tokens = await self._count(text, entry.name)
            if entry.max_tokens and tokens > entry.max_tokens:
                skipped.append(entry.name)
                continue
            outputs.append(_Output(index, entry, text, tokens))
        kept = self._admit(outputs, skipped)
        retained = [output for output in outputs if output.index in kept]
        return ProviderReport(
            blocks=[output.text for output in retained],
            fired=[{"provider_name": o.entry.name, "tokens": o.tokens} for o in retained],
            skipped=skipped,
            failed=failed,
        )

    def _admit(self, outputs: Sequence[_Output], skipped: list[str]) -> set[int]:
        """Indexes of the outputs kept under the budget, by descending priority."""
        kept: set[int] = set()
        total = 0
        # sorted() is stable: equal priorities keep registration order.
        for output in sorted(outputs, key=lambda o: -o.entry.priority):
            if total + output.tokens <= self._budget:
                kept.add(output.index)
                total += output.tokens
            else:
                skipped.append(output.entry.name)
        return kept

    async def _count(self, text: str, name: str) -> int:
        """The tokens of ``text``: the tokenizer's count, else the character estimate.

        A provider's text comes from outside (a retrieved page). A count that
        raises (tiktoken's ``encode`` refuses a special token such as
        ``<|endoftext|>`` by default), is negative or is not a whole number
        would otherwise let the text past the budget: it is logged and
        replaced by ``ceil(len(text) / CHARS_PER_TOKEN)``, which cannot fail.
        """
        tokenizer = self._tokenizer
        if tokenizer is None:
            await _tokens.load_tokenizer()
            tokenizer = _tokens.count_tokens
        try:
            tokens = tokenizer(text)
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                raise TypeError(f"the tokenizer returned {tokens!r}, not a count")
        except Exception:
            log.warning(
                "counting the tokens of provider %r failed; estimating %d characters a token",
                name,
                _tokens.CHARS_PER_TOKEN,
                exc_info=True,
            )
            return -(-len(text) // _tokens.CHARS_PER_TOKEN)
        return tokens

    async def gather_writeback(self, branch: Any, action_responses: Sequence[Any]) -> None:
        """Let each provider with a ``writeback`` hook see the turn's action responses.

        ``None`` responses are dropped; with none left, nothing runs. Hooks run
        one after another in registration order; a provider without the
        attribute (or with it set to None) is passed over; a hook that is not
        callable, not async, or raises is logged and the next one still runs.

        Cancellation: propagates from the hook being awaited.
        """
        responses = [response for response in action_responses if response is not None]
        if not responses:
            return
        for entry in list(self._entries):
            hook = getattr(entry.provider, "writeback", None)
            if hook is None:
                continue
            try:
                pending = hook(branch, responses)
                if not inspect.isawaitable(pending):
                    raise TypeError(
                        f"writeback() returned {type(pending).__name__}; it must be an async method"
                    )
                await pending
            except Exception:
                log.warning("writeback of context provider %r failed", entry.name, exc_info=True)


def _default_name(provider: Any) -> str:
    name = getattr(provider, "name", None)
    if isinstance(name, str) and name:
        return name
    return type(provider).__name__
