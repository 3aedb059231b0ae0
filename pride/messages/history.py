"""A branch's recorded conversation, with its provider renderings kept incrementally.

A model request needs the whole history in the provider's shape. Rendering it
anew each turn would make a turn's cost grow with the conversation, so
[`History`][pride.branch.branch.History] keeps, per provider shape, the already-rendered entries and
extends them as messages are appended: a turn copies a list of references and
renders only its new instruction.

Compilation rules (both shapes):

* the [`System`][pride.System] message is returned separately (the
  caller places it: first entry for OpenAI, the ``system`` parameter for
  Anthropic);
* OpenAI: consecutive assistant entries merge (text joined with a blank line,
  tool calls and Responses reasoning items concatenated), so a reply and the
  tool calls it made form one entry as the API expects;
* Anthropic: consecutive entries of the same role merge into one entry with
  their content blocks concatenated, as the Messages API requires alternation;
* compiled for an endpoint (``origin``), another endpoint's reasoning is left
  out the same way (`pride.messages.reasoning`: reasoning goes back only to
  the endpoint that produced it);
* a message with no place in the shape (another provider's
  [`Reasoning`][pride.Reasoning]: see `pride.messages.reasoning`) is left out,
  and the messages around it merge as if it were not there. A reply's
  reasoning is recorded right before the rest of the reply, so it lands first
  in the reply's own entry, beside the tool calls it led to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal, overload

from .conversation import RoledMessage, System
from .reasoning import REASONING_ITEMS, Reasoning

__all__ = ["Checkpoint", "History", "ProviderShape", "merge_entry"]

ProviderShape = Literal["openai", "anthropic"]


class Checkpoint:
    """A point of a [`History`][pride.messages.history.History] to roll back to
    (see [`History.checkpoint`][pride.messages.history.History.checkpoint])."""

    __slots__ = ("length", "saved", "system")

    def __init__(self, length: int, system: System | None) -> None:
        self.length = length
        self.system = system
        self.saved: list[RoledMessage] | None = None


class History:
    """The ordered messages of one conversation.

    Supports ``len()``, iteration, indexing and ``in``. Appending is O(1) and
    keeps every provider rendering already compiled up to date.

    ``on_rewrite``, when set, is called after every change that is not an
    append ([`clear`][pride.messages.history.History.clear],
    [`set_system`][pride.messages.history.History.set_system]), so whoever mirrors the
    history (the branch store) can take it anew.
    """

    __slots__ = ("_checkpoint", "_compiled", "_messages", "_system", "on_rewrite")

    def __init__(self, messages: Iterable[RoledMessage] = ()) -> None:
        self._messages: list[RoledMessage] = []
        self._system: System | None = None
        self._checkpoint: Checkpoint | None = None
        # Per provider shape, the merged entries of every non-system message.
        # One rendering per (shape, origin) asked for, the oldest forgotten past
        # `_MAX_RENDERINGS`: each is kept up to date by every append.
        self._compiled: dict[tuple[str, str | None], _Entries] = {}
        self.on_rewrite: Callable[[], None] | None = None
        for message in messages:
            self.append(message)

    # ---------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[RoledMessage]:
        return iter(self._messages)

    def __bool__(self) -> bool:
        return bool(self._messages)

    @overload
    def __getitem__(self, index: int) -> RoledMessage: ...
    @overload
    def __getitem__(self, index: slice) -> list[RoledMessage]: ...
    def __getitem__(self, index: int | slice) -> RoledMessage | list[RoledMessage]:
        return self._messages[index]

    def __contains__(self, message: object) -> bool:
        return message in self._messages

    def __repr__(self) -> str:
        return f"<History of {len(self._messages)} messages>"

    @property
    def system(self) -> System | None:
        """The conversation's system message, if any."""
        return self._system

    @property
    def last(self) -> RoledMessage | None:
        """The most recent message, if any."""
        return self._messages[-1] if self._messages else None

    def to_list(self) -> list[RoledMessage]:
        """A copy of the messages, in order."""
        return list(self._messages)

    # ---------------------------------------------------------------- writing

    def append(self, message: RoledMessage) -> None:
        """Record ``message`` at the end.

        A [`System`][pride.System] message replaces the current one in place (keeping
        its position at the start); it is never appended twice.

        Raises:
            TypeError: ``message`` is not a conversation message.
        """
        if not isinstance(message, RoledMessage):
            raise TypeError(f"expected a RoledMessage, got {type(message).__name__}")
        if isinstance(message, System):
            self._put_system(message)
            return
        self._messages.append(message)
        for (shape, origin), entries in self._compiled.items():
            entries.add(_render(message, shape, origin))

    def set_system(self, system: System | None) -> None:
        """Replace (or with None remove) the system message; it is always first."""
        if system is self._system:
            return  # unchanged (capability blocks hand back the same message): no rewrite
        self._put_system(system)
        self._rewritten()

    def _put_system(self, system: System | None) -> None:
        self._before_rewrite()
        if self._system is not None:
            self._messages.remove(self._system)
        self._system = system
        if system is not None:
            self._messages.insert(0, system)

    def clear(self, *, keep_system: bool = True) -> None:
        """Forget every message (the system message too unless ``keep_system``)."""
        system = self._system if keep_system else None
        self._before_rewrite()
        self._messages.clear()
        self._compiled.clear()
        self._system = None
        if system is not None:
            self._put_system(system)
        self._rewritten()

    def _rewritten(self) -> None:
        if self.on_rewrite is not None:
            self.on_rewrite()

    # ------------------------------------------------------------ checkpoints

    def checkpoint(self) -> Checkpoint:
        """Remember the history as it is now, so that `rollback` can return to it.

        O(1) while only appends follow (the common case): a rollback then
        truncates. The first change that is not an append copies what the
        checkpoint needs. One checkpoint at a time (a new one replaces it).
        A turn that stops for approval is rolled back this way, so its
        conversation is as it was before the turn.
        """
        mark = Checkpoint(len(self._messages), self._system)
        self._checkpoint = mark
        return mark

    def release(self, mark: Checkpoint) -> None:
        """Forget ``mark`` (nothing to roll back to any more)."""
        if self._checkpoint is mark:
            self._checkpoint = None

    def rollback(self, mark: Checkpoint) -> None:
        """Return to the history as it was at ``checkpoint()``, and forget ``mark``.

        Calls no listener: whoever mirrors the history (the branch store) was
        never told of what is undone.

        Raises:
            ValueError: ``mark`` is not this history's current checkpoint.
        """
        if self._checkpoint is not mark:
            raise ValueError("rollback() to a checkpoint that is not this history's current one")
        self._checkpoint = None
        if mark.saved is None:
            del self._messages[mark.length :]
        else:
            self._messages[:] = mark.saved
            self._system = mark.system
        self._compiled.clear()  # rendered again on the next request

    def _before_rewrite(self) -> None:
        mark = self._checkpoint
        if mark is not None and mark.saved is None:
            mark.saved = self._messages[: mark.length]

    # -------------------------------------------------------------- rendering

    def compile(self, shape: ProviderShape, *, origin: str | None = None) -> list[dict[str, Any]]:
        """The merged provider entries of every non-system message (a fresh list).

        With ``origin`` (an iModel's ``reasoning_origin``), a
        [`Reasoning`][pride.Reasoning] is rendered only if that endpoint produced
        it (`Reasoning.readable_by`): what a
        request to that endpoint is sent. Without, every message renders as its
        shape allows (what the history holds, for reading it).

        The entries themselves are shared with later calls: treat them as
        read-only. The first call for a shape and origin renders the history
        once; later calls copy a list.
        """
        key = (shape, origin)
        entries = self._compiled.get(key)
        if entries is None:
            if len(self._compiled) >= _MAX_RENDERINGS:  # a branch calling many endpoints
                del self._compiled[next(iter(self._compiled))]
            entries = self._compiled[key] = _Entries(shape)
            for message in self._messages:
                if not isinstance(message, System):
                    entries.add(_render(message, shape, origin))
        return entries.merged()


class _Entries:
    """One shape's rendering: the entries done, then the last ones, which merge into one.

    The last run is merged when it ends or the entries are asked for, not as each
    entry comes: merged one by one, each merge copied the run so far, and a
    model's reply is a run as long as the tool calls it asks for (its calls, then
    in Anthropic's shape their results; 80,000 took 15 to 47 s of the event loop).
    """

    __slots__ = ("_done", "_run", "_shape")

    def __init__(self, shape: str) -> None:
        self._shape = shape
        self._done: list[dict[str, Any]] = []
        self._run: list[dict[str, Any]] = []

    def add(self, entry: dict[str, Any] | None) -> None:
        if entry is None:
            return
        run = self._run
        if run and not _merges(run[-1], entry, self._shape):
            self._done.append(_merged(run, self._shape))
            run.clear()
        run.append(entry)

    def merged(self) -> list[dict[str, Any]]:
        """The entries (a fresh list; the entries themselves are shared)."""
        if len(self._run) > 1:
            self._run[:] = [_merged(self._run, self._shape)]
        return [*self._done, *self._run]


#: How many renderings (shape and origin) a history keeps up to date: a branch
#: moving among more endpoints renders its history again for the one it calls.
_MAX_RENDERINGS = 4


def _render(message: RoledMessage, shape: str, origin: str | None = None) -> dict[str, Any] | None:
    if origin is not None and isinstance(message, Reasoning) and not message.readable_by(origin):
        return None  # another endpoint's reasoning: its data, not this one's
    return message.to_openai() if shape == "openai" else message.to_anthropic()


def merge_entry(entries: list[dict[str, Any]], entry: dict[str, Any] | None, shape: str) -> None:
    """Append ``entry`` to ``entries``, merging with the last one when the shape requires.

    ``None`` (a message with no place in the shape) leaves ``entries`` as they are.
    """
    if entry is None:
        return
    if entries and _merges(entries[-1], entry, shape):
        entries[-1] = _merged([entries[-1], entry], shape)
    else:
        entries.append(entry)


def _merges(last: dict[str, Any], entry: dict[str, Any], shape: str) -> bool:
    """Whether ``entry`` merges into ``last``, the entry before it."""
    return last["role"] == entry["role"] and (shape == "anthropic" or last["role"] == "assistant")


def _merged(run: list[dict[str, Any]], shape: str) -> dict[str, Any]:
    """The one entry a run of entries that merge makes (the entry itself for one)."""
    if len(run) == 1:
        return run[0]
    if shape == "anthropic":
        return {
            "role": run[0]["role"],
            "content": [block for entry in run for block in _blocks(entry["content"])],
        }
    texts = [text for entry in run if (text := entry.get("content"))]
    merged: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
    calls = [call for entry in run for call in entry.get("tool_calls", ())]
    if calls:
        merged["tool_calls"] = calls
    items = [item for entry in run for item in entry.get(REASONING_ITEMS, ())]
    if items:  # a reply's Responses reasoning, kept with the reply it led to
        merged[REASONING_ITEMS] = items
    return merged


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)
