"""The facade verbs: each Branch verb is its work command, asked of the branch's actor.

``await branch.operate("plan", reason=True)`` is
``await pride.ask(branch, Operate("plan", reason=True))``. So a verb's
parameters are exactly its command's, plus ``timeout`` (seconds to wait, as
for [`ask`][pride.ask]), and they are declared once, on the command class
in [`pride.messages.commands`][pride.messages.commands]:

```python
class Branch:
    operate = verb(Operate)
```

`verb` builds the method from the class: its runtime signature (what
``help(branch.operate)`` and ``inspect.signature`` show) is the command's
with ``timeout`` added, its docstring is the command's, and its static type
carries the command's parameters through a ``ParamSpec``, so type checkers
and editors see and check them too (a call that passes ``timeout=`` is
accepted as such; the command's own parameters are checked on every other
call). A field added to a command (say ``budget=``) is a parameter of its
verb at once.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, overload

import attrs

from ..messages import WorkCommand
from .send import ask, stream

if TYPE_CHECKING:
    from .send import StreamItems

__all__ = ["BoundStreamVerb", "BoundVerb", "StreamVerb", "Verb", "stream_verb", "verb"]

P = ParamSpec("P")


class BoundVerb(Protocol[P]):
    """A verb of one branch: call it with its command's arguments (and ``timeout``)."""

    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, Any]: ...

    @overload
    def __call__(
        self, *args: Any, timeout: float | None, **kwargs: Any
    ) -> Coroutine[Any, Any, Any]: ...


class Verb(Protocol[P]):
    """What a verb is on the Branch class: bound to a branch when read from one."""

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Verb[P]: ...

    @overload
    def __get__(self, instance: object, owner: type[Any]) -> BoundVerb[P]: ...


class BoundStreamVerb(Protocol[P]):
    """A streaming verb of one branch: ``async with branch.run(...) as items:``."""

    def __call__(
        self, *args: P.args, **kwargs: P.kwargs
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]: ...


class StreamVerb(Protocol[P]):
    """What a streaming verb is on the Branch class."""

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> StreamVerb[P]: ...

    @overload
    def __get__(self, instance: object, owner: type[Any]) -> BoundStreamVerb[P]: ...


def verb(command: Callable[P, WorkCommand]) -> Verb[P]:
    """The verb of ``command``: ``await branch.<verb>(*args, timeout=None, **kwargs)``
    is ``await pride.ask(branch, command(*args, **kwargs), timeout)``."""
    return _Verb(command)  # type: ignore[return-value]  # replaced by a method (see _Verb)


def first_converted(
    command: Callable[Concatenate[Any, P], WorkCommand],
    convert: Callable[[Any], Any],
    name: str,
) -> Verb[Concatenate[Any, P]]:
    """A verb whose first argument, called ``name``, is passed through ``convert``
    before it becomes the command's first field (``act`` takes one call or a list)."""
    return _Verb(command, convert=convert, first=name)  # type: ignore[return-value]


def stream_verb(command: Callable[P, WorkCommand]) -> StreamVerb[P]:
    """The streaming verb of ``command``: ``branch.<verb>(*args, **kwargs)`` is
    ``pride.stream(branch, command(*args, **kwargs))``."""
    return _Verb(command, streaming=True)  # type: ignore[return-value]


class _Verb:
    """Placeholder until the class is created: then it puts the method it builds
    in its own place (``__set_name__``), so a verb is a plain function on the
    class, as cheap to call as a hand-written method."""

    def __init__(
        self,
        command: Callable[..., WorkCommand],
        *,
        streaming: bool = False,
        convert: Callable[[Any], Any] | None = None,
        first: str | None = None,
    ) -> None:
        self.command = command
        self.streaming = streaming
        self.convert = convert
        self.first = first

    def __set_name__(self, owner: type, name: str) -> None:
        method = self._build()
        method.__name__ = name
        method.__qualname__ = f"{owner.__qualname__}.{name}"
        method.__module__ = owner.__module__
        method.__doc__ = _docstring(self.command, name, self.streaming)
        method.__signature__ = _signature(  # type: ignore[attr-defined]
            self.command, timeout=not self.streaming, first=self.first
        )
        setattr(owner, name, method)

    def _build(self) -> Callable[..., Any]:
        command = self.command
        convert = self.convert
        if self.streaming:

            def streamed(branch: Any, /, *args: Any, **kwargs: Any) -> Any:
                return stream(branch, command(*args, **kwargs))

            return streamed
        if convert is not None:

            async def converted(
                branch: Any, first: Any, /, *args: Any, timeout: float | None = None, **kwargs: Any
            ) -> Any:
                return await ask(branch, command(convert(first), *args, **kwargs), timeout)

            return converted

        async def asked(
            branch: Any, /, *args: Any, timeout: float | None = None, **kwargs: Any
        ) -> Any:
            return await ask(branch, command(*args, **kwargs), timeout)

        return asked


_TIMEOUT = inspect.Parameter(
    "timeout", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="float | None"
)


def _signature(
    command: Callable[..., WorkCommand], *, timeout: bool, first: str | None
) -> inspect.Signature:
    """The command's constructor signature, bound to a branch: ``self`` first,
    ``timeout`` among the keyword-only parameters when the verb waits."""
    parameters = [_shown(command, p) for p in inspect.signature(command).parameters.values()]
    if first is not None:
        parameters[0] = parameters[0].replace(
            name=first, kind=inspect.Parameter.POSITIONAL_ONLY, annotation="Any"
        )
    if timeout:
        at = next(
            (i for i, p in enumerate(parameters) if p.kind is inspect.Parameter.VAR_KEYWORD),
            len(parameters),
        )
        parameters.insert(at, _TIMEOUT)
    positional_only = any(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in parameters)
    own = inspect.Parameter(
        "self",
        inspect.Parameter.POSITIONAL_ONLY
        if positional_only
        else inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )
    returns = "AbstractAsyncContextManager[StreamItems]" if not timeout else "Any"
    return inspect.Signature([own, *parameters], return_annotation=returns)


def _shown(command: Callable[..., WorkCommand], parameter: inspect.Parameter) -> inspect.Parameter:
    """``parameter`` with a default built by a factory shown as that call (``dict()``)."""
    if parameter.default is not attrs.NOTHING or not isinstance(command, type):
        return parameter
    if not attrs.has(command):
        return parameter
    for field in attrs.fields(command):
        default = field.default
        if field.alias == parameter.name and isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            return parameter.replace(default=_Made(default.factory))
    return parameter


class _Made:
    """A default made fresh for each call, shown as the call that makes it."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    def __repr__(self) -> str:
        return f"{getattr(self.factory, '__name__', 'factory')}()"


def _docstring(command: Callable[..., WorkCommand], verb: str, streaming: bool) -> str:
    name = getattr(command, "__name__", "the command")
    described = inspect.getdoc(command) or ""
    if streaming:
        usage = (
            f"``async with branch.{verb}(...) as items:`` is\n"
            f"``pride.stream(branch, {name}(...))``: the items as the turn produces them."
        )
    else:
        usage = (
            f"``await branch.{verb}(...)`` is\n"
            f"``await pride.ask(branch, {name}(...), timeout)``; inside the branch's own\n"
            "turn it runs nested, in that turn. ``timeout`` is seconds to wait in all\n"
            "(None: no limit)."
        )
    return f"{described}\n\nThe {name} command as a verb: {usage}"
