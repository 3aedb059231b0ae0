"""What a work command from outside may ask for: bounded counts, images only inline.

A request line (``pride run``'s stdin, or any front an application puts before
its branches) is decoded by the codec into an ordinary command, and an
ordinary command built by the application's own code keeps its full power.
`check_untrusted` is the extra gate for the first kind, applied where such
commands arrive, before they reach a mailbox:

* **Counts are bounded.** ``max_rounds``, ``max_extensions``,
  ``max_concurrent``, ``num_parse_retries`` and ``max_retries`` may not exceed
  `CEILINGS` (nor go below 0, or 1 for ``max_concurrent``): a request cannot
  ask for a million tool rounds.
* **A budget only tightens.** A command's own ``budget`` replaces its
  branch's for the application's code; from outside, `within` makes it the
  stricter of the two, field by field, so a request cannot lift a limit the
  application set.
* **Images travel inline.** Any image URL but a ``data:`` one is fetched by
  the provider (or by a local model server beside pride), so a request naming
  ``http://169.254.169.254/...`` or an intranet host would have it fetched on
  the requester's behalf: server-side request forgery by proxy. Only
  ``data:`` URLs pass, plus those under the prefixes the application trusts,
  given to the decoder that applies the gate (``check_untrusted(command,
  image_urls=...)``; ``pride run --allow-image-url PREFIX``), never a
  process-wide setting: two decoders in one process (a ``pride run`` front
  and an MCP server, say) each keep their own.

* **Request options tune the call, nothing more.** A command's
  ``request_options`` go into the provider's request body. From outside they
  may hold only the sampling and length controls of `REQUEST_OPTIONS`: any
  other key would add to what the provider is asked to do on the
  application's account (a tool of the provider's own that calls a server the
  request names, as OpenAI's remote MCP tool does with its ``server_url``; a
  stored conversation to continue, ``previous_response_id``; storing this
  one, ``store``), and ``model`` would pick a model the application never
  offered (the codec refuses that one for every decoded command).

All are `InvalidMessage` naming the field, like any other bad input. The
codec itself does not apply them, so a command still survives a JSON round
trip unchanged, and pride's own wire (the cluster's, the turn journal's)
carries what the application built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._errors import InvalidMessage
from .budget import BUDGET_FIELDS, Budget
from .commands import Call, WorkCommand

__all__ = ["CEILINGS", "REQUEST_OPTIONS", "check_untrusted", "image_url_prefixes", "within"]

CEILINGS: Mapping[str, int] = {
    "max_rounds": 100,
    "max_extensions": 100,
    "max_concurrent": 256,
    "num_parse_retries": 100,
    "max_retries": 100,
}
"""The largest value each count field of a command from outside may hold (each far
above its default; ``num_parse_retries`` and ``max_retries`` are capped at 5 anyway)."""


REQUEST_OPTIONS: frozenset[str] = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "seed",
        "stop",
        "stop_sequences",
        "frequency_penalty",
        "presence_penalty",
        "logprobs",
        "top_logprobs",
        "parallel_tool_calls",
        "reasoning",
        "reasoning_effort",
        "reasoning_summary",
        "thinking",
        "prompt_cache",
    }
)
"""The ``request_options`` a command from outside may set: how the model samples and
how long it may answer or think (each provider checks its values; a budget still
bounds what they cost). Every other key is refused (see the module docstring)."""


def image_url_prefixes(*prefixes: str) -> tuple[str, ...]:
    """``prefixes``, checked: the image URL prefixes a decoder may let through.

    E.g. ``image_url_prefixes("https://cdn.example.com/")``; no prefix (the
    default) means ``data:`` URLs only.

    Raises:
        ValueError: a prefix is not an ``http(s)://`` URL with a host and a path
            (``"https://"`` alone would allow every host).
    """
    for prefix in prefixes:
        scheme, _, rest = prefix.partition("://") if isinstance(prefix, str) else ("", "", "")
        host, slash, _ = rest.partition("/")
        if scheme not in ("http", "https") or not host or not slash:
            raise ValueError(
                "an image URL prefix is an http(s) URL with a host and a path such as "
                f"'https://cdn.example.com/', got {prefix!r}"
            )
    return tuple(prefixes)


def check_untrusted(
    command: WorkCommand, where: str | None = None, *, image_urls: Sequence[str] = ()
) -> None:
    """Refuse what a command from outside may not ask for (see the module docstring).

    ``where`` names the command in messages (default: its class name).
    ``image_urls`` are the prefixes of image URLs this decoder lets through
    besides ``data:`` ones (checked by `image_url_prefixes`); none by default.

    Raises:
        InvalidMessage: naming every offending field.
        ValueError: a prefix in ``image_urls`` allows too much (see `image_url_prefixes`).
        TypeError: ``image_urls`` is a single string, not a sequence of them.
    """
    if isinstance(image_urls, str):
        raise TypeError(f"image_urls is a sequence of URL prefixes, got the string {image_urls!r}")
    allowed = image_url_prefixes(*image_urls)
    name = where or type(command).__name__
    if isinstance(command, Call):  # a verb run by name takes the same fields as kwargs
        fields: Mapping[str, Any] = command.kwargs
        name = f"{name}.kwargs"
    else:
        fields = {field: getattr(command, field, None) for field in (*CEILINGS, "images")}
    problems: list[tuple[str, str]] = []
    for field, ceiling in CEILINGS.items():
        value: Any = fields.get(field)
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            continue
        floor = 1 if field == "max_concurrent" else 0
        if value > ceiling:
            problems.append(
                (
                    f"{name}.{field}",
                    f"{value} is beyond the ceiling of {ceiling} for a command from outside "
                    "(pride.messages.limits.CEILINGS)",
                )
            )
        elif value < floor:
            problems.append((f"{name}.{field}", f"must be at least {floor}, got {value}"))
    if isinstance(command, Call):
        problems.extend(_options_problems(command.kwargs, name, deep=True))
    else:
        options = getattr(command, "request_options", None)
        problems.extend(_options_problems({"request_options": options}, name, deep=False))
    images = fields.get("images")
    for index, url in enumerate(images if isinstance(images, list | tuple) else ()):
        if not isinstance(url, str) or url[:5].lower() == "data:":
            continue
        if url.startswith(allowed):
            continue
        shown = url if len(url) <= 80 else url[:77] + "..."
        problems.append(
            (
                f"{name}.images[{index}]",
                f"{shown!r}: a command from outside carries images as data: URLs only (the "
                "provider would fetch any other URL on the sender's behalf); the application "
                "can allow places it trusts (pride run --allow-image-url PREFIX, or "
                "check_untrusted(..., image_urls=...))",
            )
        )
    if problems:
        raise InvalidMessage(problems)


def _options_problems(value: Any, where: str, *, deep: bool) -> list[tuple[str, str]]:
    """The keys of a ``request_options`` in ``value`` outside `REQUEST_OPTIONS`, as
    problems; with ``deep`` (a Call's arguments, which an operation may pass on to a
    verb) at every depth, as the codec looks for a model configuration there."""
    found: list[tuple[str, str]] = []
    if isinstance(value, list | tuple):
        if deep:
            for index, item in enumerate(value):
                found.extend(_options_problems(item, f"{where}[{index}]", deep=deep))
        return found
    if not isinstance(value, Mapping):
        return found
    options = value.get("request_options")
    if isinstance(options, Mapping):
        for key in options:
            if key in REQUEST_OPTIONS or key == "model":  # model: refused by the codec
                continue
            shown = repr(key) if len(key) <= 80 else repr(key[:77] + "...")
            found.append(
                (
                    f"{where}.request_options.{shown[1:-1]}",
                    f"{shown} is not an option a command from outside may set: only the "
                    "sampling and length controls (pride.messages.limits.REQUEST_OPTIONS); "
                    "anything else would add to what the provider is asked to do on the "
                    "application's account",
                )
            )
    if deep:
        for key, item in value.items():
            if key != "request_options" and isinstance(item, Mapping | list | tuple):
                found.extend(_options_problems(item, f"{where}.{key}", deep=deep))
    return found


def within(command: WorkCommand, ceiling: Budget | None) -> WorkCommand:
    """``command`` with its own budget held within ``ceiling`` (the budget of the
    branch it goes to): for each limit, the stricter of the two.

    A command without a budget of its own, or a branch without one, is returned
    as it is: the branch's budget then applies as usual.
    """
    requested = command.budget
    if requested is None or ceiling is None:
        return command
    limits: dict[str, Any] = {}
    for name in BUDGET_FIELDS:
        mine, theirs = getattr(requested, name), getattr(ceiling, name)
        limits[name] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
    if isinstance(command, Call):  # its own __init__: the operation, then its arguments
        return Call(command.operation, budget=Budget(**limits), **command.kwargs)
    return attrs.evolve(command, budget=Budget(**limits))
