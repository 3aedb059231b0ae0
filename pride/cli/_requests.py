"""The JSON-lines protocol of ``pride run``: requests on stdin, answers on stdout.

A request is one line:

```json
{"id": "r1", "to": "planner", "command": {"type": "ChatAndRecord", "instruction": "hi"}}
```

``id`` is chosen by the client and echoed in the answer: a string, an
integer a JSON client holds exactly (at most 2**53 - 1 either way, as I-JSON
says), or null; ``to`` is a branch name or id in the running tree; ``command`` is a
work command in pride's wire form ([`pride.messages.codec`][pride.messages.codec]). Each
request gets exactly one answer line:

```json
{"id": "r1", "ok": true, "result": "..."}
{"id": "r1", "ok": false, "error": {"type": "BranchClosed", "message": "..."}}
```

An error that carries data says it in the error object too:
``ApprovalRequired`` (and ``ApprovalPending``) add ``turn_id``, ``branch`` and
``pending`` (each call's ``call_id``, ``function`` and ``arguments``), what a
``Resume`` request needs to continue the turn.

A line that is not a valid request is answered with an ``InvalidMessage``
error naming what was wrong (``id`` is null when it could not be read).
Request lines are read as strict JSON (`pride.messages.codec.parse_json`:
no ``NaN``, no integer past 64 bits, no lone surrogate). Results are plain
data through the codec when possible, else their ``str``; every answer line
is strict JSON, what it cannot carry replaced (a lone surrogate by U+FFFD, a
non-finite float by null).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from ..errors import InvalidMessage
from ..messages import WorkCommand
from ..messages.codec import dump_json, parse_json
from ..messages.requests import decode_command, describe_error, plain_result

__all__ = ["MAX_ID", "Request", "RequestRejected", "error_line", "ok_line", "parse_request"]

MAX_ID = 2**53 - 1
"""The largest request id magnitude: beyond it a JavaScript client cannot hold the id exactly."""


@attrs.frozen
class Request:
    """One parsed request line."""

    id: str | int | None
    to: str
    command: WorkCommand


class RequestRejected(Exception):
    """A line that is not a valid request; ``error`` says why, ``request_id`` if it was read."""

    def __init__(self, request_id: Any, error: InvalidMessage) -> None:
        super().__init__(str(error))
        self.request_id = request_id
        self.error = error


def parse_request(line: str, *, image_urls: Sequence[str] = ()) -> Request:
    """Parse one request line; ``image_urls`` are the image URL prefixes its command
    may carry besides ``data:`` URLs (``pride run --allow-image-url``).

    Raises:
        RequestRejected: the line is not JSON, not an object, or its ``id``,
            ``to`` or ``command`` is missing or invalid (priority commands
            such as ``Stop`` are refused: supervision belongs to the process).
    """
    try:
        data = parse_json(line)
    except InvalidMessage as exc:
        where = "request" + exc.path.removeprefix("$")
        reason = exc.reason.replace("invalid JSON", "not JSON", 1)
        raise RequestRejected(_readable_id(line), InvalidMessage([(where, reason)])) from None
    if not isinstance(data, dict):
        found = type(data).__name__
        raise RequestRejected(
            None, InvalidMessage([("request", f"expected an object, got {found}")])
        )
    request_id = data.get("id")
    problems: list[tuple[str, str]] = []
    if not _valid_id(request_id):
        problems.append(("request.id", f"expected a string, an integer within ±{MAX_ID} or null"))
        request_id = None
    target = data.get("to")
    if not isinstance(target, str) or not target:
        problems.append(("request.to", "expected a branch name or id"))
    unknown = sorted(set(data) - {"id", "to", "command"})
    if unknown:
        problems.append(("request", f"unknown keys: {', '.join(unknown)}"))
    if "command" not in data:
        problems.append(("request.command", "missing"))
    if problems:
        raise RequestRejected(request_id, InvalidMessage(problems))
    try:
        # The one decoder of commands from outside (pride serve's too): priority
        # commands refused, models by name only, counts bounded, images inline.
        command = decode_command(data["command"], image_urls=image_urls, where="request.command")
    except InvalidMessage as exc:
        raise RequestRejected(request_id, exc) from None
    assert isinstance(target, str)
    return Request(request_id, target, command)


def _readable_id(line: str) -> str | int | None:
    """The id of a line refused as a whole (a NaN or a lone surrogate somewhere in it),
    when a lenient read still finds a valid one: the answer can then be matched."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    found = data.get("id") if isinstance(data, dict) else None
    return found if _valid_id(found) else None


def _valid_id(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # a lone surrogate could not be echoed for matching
        except UnicodeEncodeError:
            return False
        return True
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_ID <= value <= MAX_ID


def ok_line(request_id: Any, result: Any) -> str:
    """The answer line for a result; never raises: a result that cannot be written
    (its ``str()`` raises: an application's object) is named by its type instead."""
    try:
        return _dump({"id": request_id, "ok": True, "result": plain_result(result)})
    except InvalidMessage:  # nested past the recursion limit
        pass
    except Exception as exc:  # str() of an application's object: anything at all
        return _dump({"id": request_id, "ok": True, "result": _unwritable(result, exc)})
    try:
        return _dump({"id": request_id, "ok": True, "result": str(result)})
    except Exception as exc:
        return _dump({"id": request_id, "ok": True, "result": _unwritable(result, exc)})


def _unwritable(result: Any, exc: Exception) -> str:
    kind, error = type(result).__name__, type(exc).__name__
    return f"<a {kind} that cannot be written: its str() raised {error}>"


def error_line(request_id: Any, error: BaseException) -> str:
    """The answer line for an error: its class name and message (and its details,
    for an error that has them, such as ``ApprovalRequired``)."""
    return _dump({"id": request_id, "ok": False, "error": describe_error(error)})


def _dump(answer: dict[str, Any]) -> str:
    return dump_json(answer, replace=True)
