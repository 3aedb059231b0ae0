"""Find the function ``pride run`` starts: ``module:function`` or ``file.py:function``."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..branch import Branch
from ..errors import PrideError
from ..supervisors import Session
from ._startup import cannot_start, listed

__all__ = ["AppError", "app_failed", "call_app", "load_agent", "load_app"]

log = logging.getLogger("pride.cli")


class AppError(Exception):
    """The application could not be found or started; the message says why."""


def load_app(spec: str) -> Callable[..., Any]:
    """The function named by ``spec``.

    ``spec`` is ``package.module:function`` (imported with the current
    directory first on ``sys.path``, as ``python -m`` would) or
    ``path/to/file.py:function`` (loaded from that file, whose directory is
    put first on ``sys.path`` so its sibling imports work).

    Raises:
        AppError: a malformed spec, a module that cannot be imported (its
            error chained), or no callable of that name.
    """
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise AppError(f"APP must be module:function or path/to/file.py:function, got {spec!r}")
    if target.endswith(".py") or os.sep in target or "/" in target:
        module = _load_file(Path(target))
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise AppError(f"cannot import {target!r}: {exc}") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise AppError(f"{target!r} has no function {name!r} (its functions: {_functions(module)})")
    return function  # type: ignore[no-any-return]


def _functions(module: Any) -> str:
    """The public functions defined in ``module`` (not those it imported)."""
    return listed(
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and not name.startswith("_")
        and value.__module__ == module.__name__
    )


def app_failed(command: str, exc: AppError) -> int:
    """Say in one line (`cannot_start`) that the app could not be loaded or started.

    pride's own errors (no API key, a provider refusing) and a missing module
    say what to fix in their message. Any other cause is the app's own bug:
    its traceback is logged at DEBUG, and the line says how to see it.
    """
    cause = exc.__cause__
    if cause is None or isinstance(cause, PrideError | ModuleNotFoundError):
        return cannot_start(command, str(exc))
    log.debug("%s", exc, exc_info=cause)
    return cannot_start(command, f"{exc} (--log-level DEBUG shows where)")


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise AppError(f"no such file: {path}")
    directory = str(path.resolve().parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    module_name = f"pride_app_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise AppError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise AppError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def load_agent(spec: str) -> Branch:
    """The branch ``pride chat --agent MODULE:FUNCTION`` talks to: ``function()``.

    Raises:
        AppError: as `load_app`; or the function raised (its error chained), or
            returned something other than a [`Branch`][pride.Branch].
    """
    function = load_app(spec)
    try:
        branch = function()
    except Exception as exc:
        raise AppError(f"{spec} failed: {type(exc).__name__}: {exc}") from exc
    if inspect.iscoroutine(branch):
        branch.close()  # never awaited: say so instead of a warning at exit
        raise AppError(f"{spec} is async; an agent function is a plain function returning a Branch")
    if not isinstance(branch, Branch):
        raise AppError(
            f"{spec} returned {type(branch).__name__}; an agent function takes no arguments "
            "and returns the Branch to talk to (its model, tools and system prompt)"
        )
    return branch


async def call_app(function: Callable[..., Any], session: Session, cluster: Any = None) -> None:
    """Call ``function(session)`` and add what it returns to ``session``.

    With a ``cluster`` (``pride run --cluster``) the call is ``function(session,
    cluster)``: the function places its branches with ``cluster.spawn(...)``.

    The function (sync or async) normally spawns its branches and child
    sessions into ``session`` and returns None. A factory that instead
    returns a [`Session`][pride.Session] tree, a [`Branch`][pride.Branch], or a
    list of them has each spawned into ``session``.

    Raises:
        AppError: the function cannot take the session (and the cluster), it
            raised (its error chained), or it returned something else.
    """
    try:
        if cluster is None:
            _check_takes_session(function)
            result = function(session)
        else:
            _check_takes_cluster(function)
            result = function(session, cluster)
        if inspect.isawaitable(result):
            result = await result
        members = result if isinstance(result, list | tuple) else [result]
        for member in members:
            if member is None or member is session:
                continue
            if isinstance(member, Branch):
                await session.spawn(member)
                continue
            if not isinstance(member, Session):
                raise AppError(
                    f"the app returned {type(member).__name__}; return None (after spawning "
                    "into the session it receives), a Session, a Branch, or a list of them"
                )
            await session.spawn(member)
    except AppError:
        raise
    except Exception as exc:
        raise AppError(f"the app failed to start: {type(exc).__name__}: {exc}") from exc


def _check_takes_session(function: Callable[..., Any]) -> None:
    name = getattr(function, "__name__", repr(function))
    _check_takes(
        function,
        1,
        f"the app function {name!r} receives the root Session and spawns its branches "
        f"into it (def {name}(session): ...; await session.spawn(Branch(...)))",
    )


def _check_takes_cluster(function: Callable[..., Any]) -> None:
    _check_takes(
        function,
        2,
        f"with --cluster, the app function {getattr(function, '__name__', function)!r} "
        "takes (session, cluster) and places its branches with cluster.spawn(...)",
    )


def _check_takes(function: Callable[..., Any], arguments: int, usage: str) -> None:
    """Refuse ``function`` unless it can be called with ``arguments`` positional
    arguments; one without a signature to read is let through, for the call to say.

    Checked before the call: a TypeError from calling it would read as a bug inside it.

    Raises:
        AppError: it cannot be called so (``usage`` says how it is called).
    """
    try:
        inspect.signature(function).bind(*(None,) * arguments)
    except TypeError:
        raise AppError(usage) from None
    except ValueError:  # no signature to read: let the call say
        pass
