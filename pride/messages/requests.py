"""The wire form of a request from outside, shared by every front door.

``pride run`` reads requests as JSON lines on standard input and ``pride
serve`` as HTTP bodies; both decode the command in a request, and encode its
answer, through this one module, so the two speak the same wire form and
apply the same trust rules:

* a command is a work command in the codec's wire form
  ([`pride.messages.codec`][pride.messages.codec]); a priority command
  (``Attach``, ``Detach``, ``Stop``) is refused, since supervision belongs to
  the process;
* a model is picked only by name (the codec decodes every model field as a
  [`ModelName`][pride.messages.commands.ModelName] and refuses a configuration);
* counts are bounded and images travel inline, but under the prefixes the
  front trusts ([`check_untrusted`][pride.messages.limits.check_untrusted]);
* an answer's result is plain data through the codec when it has a wire
  form, else its ``str``; an error is its class name and message, plus the
  data some errors carry (an error with a ``details()`` method:
  ``ApprovalRequired`` names its turn and pending calls, ``BudgetExceeded``
  its limit and figures).

What the request around the command looks like (a line with an ``id`` and a
``to``, an HTTP path naming the branch) is each front's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import InvalidMessage, PrideError
from .budget import Budget
from .codec import structure, unstructure
from .commands import WorkCommand
from .limits import check_untrusted, within

__all__ = [
    "SUPERVISION",
    "decode_command",
    "describe_error",
    "for_branch",
    "for_remote",
    "plain_result",
]

SUPERVISION = frozenset({"Attach", "Detach", "Stop"})
"""Priority-lane commands: the process supervises its tree; clients only send work."""


def decode_command(
    data: Any, *, image_urls: Sequence[str] = (), where: str = "command"
) -> WorkCommand:
    """The work command ``data`` (decoded JSON from outside) describes, checked.

    Args:
        data: the command's wire form (``{"type": "ChatAndRecord", ...}``).
        image_urls: image URL prefixes the command may carry besides ``data:``
            URLs (`pride.messages.limits.image_url_prefixes`; none by default).
        where: the command's place in the request, for error paths
            (``"request.command"``).

    Raises:
        InvalidMessage: not a work command (a priority command, an unknown
            type, a bad field, a model configuration), or past a bound of
            `pride.messages.limits`; the path names the field.
    """
    tag = data.get("type") if isinstance(data, dict) else None
    if isinstance(tag, str) and tag in SUPERVISION:
        reason = f"{tag} is for supervisors; send a work command (Chat, ChatAndRecord, ...)"
        raise InvalidMessage([(where, reason)])
    command: WorkCommand = structure(data, WorkCommand)
    check_untrusted(command, image_urls=image_urls)
    return command


def plain_result(result: Any) -> Any:
    """A command's result as plain JSON data: its wire form, else its ``str``."""
    try:
        return unstructure(result)
    except (InvalidMessage, TypeError, ValueError, RecursionError):
        return str(result)


def describe_error(error: BaseException) -> dict[str, Any]:
    """An error as plain data: ``{"type": class name, "message": str(error), ...}``.

    A pride error with a ``details()`` method adds what it returns (the
    turn id and pending calls of ``ApprovalRequired``, the figures of
    ``BudgetExceeded``), so a client can act on it or rebuild it.
    """
    described: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    details = getattr(error, "details", None)
    if isinstance(error, PrideError) and callable(details):
        extra = details()
        if isinstance(extra, dict):
            for key, value in extra.items():
                described.setdefault(key, value)
    return described


def for_branch(command: WorkCommand, budget: Budget | None) -> WorkCommand:
    """``command`` as it may go to a branch whose budget is ``budget``: its own budget
    held within the branch's (`pride.messages.limits.within`: a request never lifts a limit)."""
    return within(command, budget)


def for_remote(command: WorkCommand) -> WorkCommand:
    """``command`` as it may go to a branch placed on a cluster host.

    Raises:
        InvalidMessage: it carries a budget: the host keeps the branch's budget,
            unseen here, so a budget from outside could lift it.
    """
    if command.budget is not None:
        raise InvalidMessage(
            [
                (
                    f"{type(command).__name__}.budget",
                    "a branch placed on a cluster host keeps its budget on the host; "
                    "a request to it may not carry one",
                )
            ]
        )
    return command
