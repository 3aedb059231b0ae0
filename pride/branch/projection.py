"""A branch's serialised projection and its clone.

``Branch.to_dict`` exports a deliberate subset of the aggregate, not a
process checkpoint. After the identity fields (``id``, ``created_at``,
``metadata``, ``user``, ``name``) come, in this order:

============  ====================================================================
key           present
============  ====================================================================
messages      always; empty form ``{"collections": [], "progression": {"order": []}}``
logs          when ``include_logs`` and the log is not empty
system        when the conversation has a system message
log_config    when ``include_log_config``
chat_model    always (``iModel.to_dict()``: never an API key)
parse_model   when it is not the same object as the chat model
============  ====================================================================

``messages.collections`` holds every message (the system message too) as the
codec's plain data; ``messages.progression.order`` their ids, in order. Tools,
operations, memory, context providers and their report, the capability
grant, the observer, hooks and session ownership are never exported: they
are live objects, re-wired by code after a restore.

Modes:

* ``"python"``: plain data; ``id`` is a `uuid.UUID` and ``metadata``
  a deep copy of whatever it holds;
* ``"json"``: JSON-safe throughout (``id`` a string; ``metadata`` checked);
* ``"db"``: ``"json"`` with ``metadata`` stored under ``db_meta_key``
  (default ``"node_metadata"``), since ``metadata`` is a reserved attribute
  name in common ORMs. ``from_dict`` reads ``node_metadata`` by itself and
  any other key when given the same ``db_meta_key``.

Model configuration: request options (``temperature``, ...) are exported
only with ``include_request_options``; rate-limit and queue settings only
with ``include_processor_config``.
"""

from __future__ import annotations

import copy
import logging
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar
from uuid import UUID

import attrs

from ..actors.logs import LogConfig, LogEntry
from ..errors import InvalidMessage
from ..llm import iModel
from ..messages import ActionResponse, RoledMessage, System, new_id, structure, unstructure

if TYPE_CHECKING:
    from ..actors.logs import DataLogger
    from ..messages import Budget
    from ..messages.history import History
    from ..tools import ActionManager

__all__ = ["DEFAULT_DB_META_KEY", "Mode", "Projected", "clone", "from_dict", "to_dict"]

log = logging.getLogger("pride.branch")

Mode = Literal["python", "json", "db"]
_MODES = ("python", "json", "db")

DEFAULT_DB_META_KEY = "node_metadata"
"""Where ``to_dict(mode="db")`` puts the metadata unless told otherwise."""

_PROCESSOR_KEYS = (
    "limit_requests",
    "limit_tokens",
    "queue_capacity",
    "capacity_refresh_time",
    "concurrency_limit",
)
_KNOWN = frozenset(
    {
        "id",
        "created_at",
        "user",
        "name",
        "messages",
        "logs",
        "system",
        "log_config",
        "chat_model",
        "parse_model",
    }
)
_ROOT = "Branch"
B = TypeVar("B")


class Projected(Protocol):
    """What a projection reads of a branch (a `pride.Branch` is one)."""

    @property
    def id(self) -> UUID: ...

    @property
    def name(self) -> str: ...

    @property
    def user(self) -> str | None: ...

    @property
    def created_at(self) -> float: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...

    @property
    def messages(self) -> History: ...

    @property
    def system(self) -> System | None: ...

    @property
    def logs(self) -> DataLogger: ...

    @property
    def acts(self) -> ActionManager: ...

    @property
    def chat_model(self) -> iModel: ...

    @property
    def parse_model(self) -> iModel: ...

    @property
    def mailbox_size(self) -> int: ...

    @property
    def budget(self) -> Budget | None: ...


_JSON_OBJECT = Mapping[str, Any]


# ------------------------------------------------------------------ to_dict


def to_dict(
    branch: Projected,
    mode: Mode = "python",
    db_meta_key: str | None = None,
    *,
    include_request_options: bool = False,
    include_logs: bool = True,
    include_log_config: bool = False,
    include_processor_config: bool = False,
) -> dict[str, Any]:
    """The branch's serialised projection (what ``Branch.to_dict`` returns).

    Identity (``id``, ``created_at``, ``metadata``, ``user``, ``name``),
    then ``messages`` (always), ``logs`` (when included and not empty),
    ``system`` (when there is one), ``log_config`` (when included),
    ``chat_model`` (always) and ``parse_model`` (when distinct). No API
    key, tool, provider, memory, grant, operation or session reference.
    The module docstring (`pride.branch.projection`) has the details.

    Args:
        branch: the branch to project.
        mode: ``"python"``, ``"json"`` (JSON-safe) or ``"db"`` (JSON-safe,
            metadata under ``db_meta_key``, default ``"node_metadata"``).
        db_meta_key: the metadata key in ``"db"`` mode.
        include_request_options: export the models' request options.
        include_logs: export the call log (omitted when empty anyway).
        include_log_config: export the log configuration.
        include_processor_config: export the models' rate-limit settings.

    Raises:
        ValueError: ``mode`` is not ``"python"``, ``"json"`` or ``"db"``.
        InvalidMessage: in ``"json"``/``"db"`` mode, metadata (or a model's
            request options) holds something JSON cannot carry; the path says where.
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}; got {mode!r}")
    json_safe = mode != "python"
    meta_key = (db_meta_key or DEFAULT_DB_META_KEY) if mode == "db" else "metadata"
    messages = branch.messages.to_list()
    out: dict[str, Any] = {
        "id": str(branch.id) if json_safe else branch.id,
        "created_at": branch.created_at,
        meta_key: _json(branch.metadata, f"{_ROOT}.metadata")
        if json_safe
        else copy.deepcopy(branch.metadata),
        "user": _json(branch.user, f"{_ROOT}.user") if json_safe else branch.user,
        "name": branch.name,
        "messages": {
            "collections": [unstructure(message) for message in messages],
            "progression": {"order": [str(message.id) for message in messages]},
        },
    }
    if include_logs and branch.logs:
        entries = [entry.to_dict() for entry in branch.logs]
        out["logs"] = _json(entries, f"{_ROOT}.logs") if json_safe else entries
    if branch.system is not None:
        out["system"] = unstructure(branch.system)
    if include_log_config:
        out["log_config"] = branch.logs.config.to_dict()
    options = (include_request_options, include_processor_config)
    out["chat_model"] = _model_dict(branch.chat_model, *options, json_safe, "chat_model")
    if branch.parse_model is not branch.chat_model:
        out["parse_model"] = _model_dict(branch.parse_model, *options, json_safe, "parse_model")
    return out


def _model_dict(
    model: iModel, request_options: bool, processor: bool, json_safe: bool, key: str
) -> dict[str, Any]:
    data = dict(model.to_dict())
    data.pop("api_key", None)  # to_dict never writes one; belt and braces
    if not request_options:
        data.pop("request_options", None)
    if not processor:
        for name in _PROCESSOR_KEYS:
            data.pop(name, None)
    result: dict[str, Any] = _json(data, f"{_ROOT}.{key}") if json_safe else data
    return result


def _json(value: Any, path: str) -> Any:
    """A JSON-safe copy of ``value``, or InvalidMessage naming where it is not."""
    try:
        return structure({"value": value}, _JSON_OBJECT)["value"]
    except InvalidMessage as exc:
        raise InvalidMessage(_rerooted(exc, path, strip=".value")) from None


def _rerooted(exc: InvalidMessage, path: str, *, strip: str = "") -> list[tuple[str, str]]:
    """The problems of ``exc`` with their root replaced by ``path``."""
    problems = []
    for where, reason in exc.problems:
        cut = min((i for i in (where.find("."), where.find("[")) if i >= 0), default=len(where))
        rest = where[cut:]
        if strip and rest.startswith(strip):
            rest = rest[len(strip) :]
        problems.append((f"{path}{rest}", reason))
    return problems


# ---------------------------------------------------------------- from_dict


def from_dict(
    cls: Callable[..., B],
    data: Any,
    *,
    chat_model: iModel | None = None,
    parse_model: iModel | None = None,
    db_meta_key: str | None = None,
) -> B:
    """A standalone branch rebuilt from a [`to_dict`][pride.branch.projection.to_dict] projection;
    ``data`` is not modified.

    Raises:
        InvalidMessage: naming every offending path (``Branch.messages.collections[2]
            .instruction: expected str, got int``).
    """
    if not isinstance(data, Mapping):
        raise InvalidMessage([(_ROOT, f"expected an object, got {_kind(data)}")])
    meta_key = db_meta_key or (
        DEFAULT_DB_META_KEY
        if "metadata" not in data and DEFAULT_DB_META_KEY in data
        else "metadata"
    )
    reader = _Reader()
    unknown = sorted(str(key) for key in data if key not in _KNOWN and key != meta_key)
    if unknown:
        reader.problem(_ROOT, f"unknown field(s) {', '.join(unknown)}")
    kwargs: dict[str, Any] = {
        "id": reader.uuid(data.get("id"), f"{_ROOT}.id"),
        "created_at": reader.number(data.get("created_at"), f"{_ROOT}.created_at"),
        "metadata": reader.mapping(data.get(meta_key), f"{_ROOT}.{meta_key}"),
        "user": reader.optional_str(data.get("user"), f"{_ROOT}.user"),
        "name": reader.optional_str(data.get("name"), f"{_ROOT}.name"),
    }
    messages = reader.messages(data.get("messages"), f"{_ROOT}.messages")
    kwargs["messages"] = messages
    if data.get("system") is not None and not any(isinstance(m, System) for m in messages):
        # The conversation's own system message wins; a top-level one fills in only when absent.
        kwargs["system"] = reader.system(data["system"], f"{_ROOT}.system")
    kwargs["logs"] = reader.logs(data.get("logs"), f"{_ROOT}.logs")
    kwargs["log_config"] = reader.log_config(data.get("log_config"), f"{_ROOT}.log_config")
    kwargs["chat_model"] = (
        chat_model
        if chat_model is not None
        else reader.model(data.get("chat_model"), f"{_ROOT}.chat_model")
    )
    if parse_model is not None:
        kwargs["parse_model"] = parse_model
    elif data.get("parse_model") is not None:
        kwargs["parse_model"] = reader.model(data["parse_model"], f"{_ROOT}.parse_model")
    reader.raise_if_any()
    return cls(**kwargs)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class _Reader:
    """Reads projection fields, collecting every problem before raising once."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def problem(self, path: str, reason: str) -> None:
        self.problems.append((path, reason))

    def raise_if_any(self) -> None:
        if self.problems:
            raise InvalidMessage(self.problems)

    def uuid(self, value: Any, path: str) -> UUID | None:
        if value is None or isinstance(value, UUID):
            return value
        if isinstance(value, str):
            try:
                return UUID(value)
            except ValueError:
                pass
        self.problem(path, f"expected a UUID string, got {value!r}")
        return None

    def number(self, value: Any, path: str) -> float | None:
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            return value
        self.problem(path, f"expected a number, got {_kind(value)}")
        return None

    def optional_str(self, value: Any, path: str) -> str | None:
        if value is None or isinstance(value, str):
            return value
        self.problem(path, f"expected str or null, got {_kind(value)}")
        return None

    def mapping(self, value: Any, path: str) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.problem(path, f"expected an object, got {_kind(value)}")
            return None
        return copy.deepcopy(dict(value))

    def messages(self, value: Any, path: str) -> list[RoledMessage]:
        if value is None:
            return []
        if not isinstance(value, Mapping):
            self.problem(path, f"expected an object, got {_kind(value)}")
            return []
        extra = sorted(str(key) for key in value if key not in ("collections", "progression"))
        if extra:
            self.problem(path, f"unknown field(s) {', '.join(extra)}")
        collections = value.get("collections", [])
        progression = value.get("progression", {"order": []})
        if not isinstance(collections, list | tuple):
            self.problem(f"{path}.collections", f"expected a list, got {_kind(collections)}")
            return []
        by_id: dict[UUID, RoledMessage] = {}
        systems = 0
        for index, item in enumerate(collections):
            where = f"{path}.collections[{index}]"
            try:
                message: RoledMessage = structure(item, RoledMessage)
            except InvalidMessage as exc:
                self.problems.extend(_rerooted(exc, where))
                continue
            if message.id in by_id:
                self.problem(f"{where}.id", f"duplicate message id {message.id}")
                continue
            systems += isinstance(message, System)
            if systems > 1 and isinstance(message, System):
                self.problem(where, "a conversation has at most one system message")
            by_id[message.id] = message
        return self._ordered(by_id, progression, f"{path}.progression")

    def _ordered(
        self, by_id: Mapping[UUID, RoledMessage], progression: Any, path: str
    ) -> list[RoledMessage]:
        order = progression.get("order") if isinstance(progression, Mapping) else None
        if not isinstance(order, list | tuple):
            self.problem(f"{path}.order", f"expected a list of message ids, got {_kind(order)}")
            return list(by_id.values())
        ordered: list[RoledMessage] = []
        seen: set[UUID] = set()
        for index, raw in enumerate(order):
            where = f"{path}.order[{index}]"
            message_id = self.uuid(raw, where)
            if message_id is None:
                continue
            if message_id in seen:
                self.problem(where, f"message id {message_id} appears twice")
            elif message_id not in by_id:
                self.problem(where, f"message id {message_id} is not in collections")
            else:
                seen.add(message_id)
                ordered.append(by_id[message_id])
        missing = [str(message_id) for message_id in by_id if message_id not in seen]
        if missing:
            self.problem(f"{path}.order", f"missing message id(s) {', '.join(missing)}")
        return ordered

    def system(self, value: Any, path: str) -> System | str | None:
        if isinstance(value, str):
            return value
        try:
            system: System = structure(value, System)
        except InvalidMessage as exc:
            self.problems.extend(_rerooted(exc, path))
            return None
        return system

    def logs(self, value: Any, path: str) -> list[LogEntry]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            self.problem(path, f"expected a list, got {_kind(value)}")
            return []
        entries: list[LogEntry] = []
        for index, item in enumerate(value):
            try:
                entries.append(structure(item, LogEntry))
            except InvalidMessage as exc:
                self.problems.extend(_rerooted(exc, f"{path}[{index}]"))
        return entries

    def log_config(self, value: Any, path: str) -> LogConfig | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.problem(path, f"expected an object, got {_kind(value)}")
            return None
        try:
            return LogConfig.coerce(value)
        except (TypeError, ValueError) as exc:
            self.problem(path, str(exc))
            return None

    def model(self, value: Any, path: str) -> iModel | None:
        if value is None:
            return None
        if isinstance(value, str):
            spec: str | dict[str, Any] = value
        elif isinstance(value, Mapping):
            spec = dict(value)
            if spec.pop("api_key", None) is not None:
                # A projection never carries a key; one in the data is not restored.
                log.warning("%s: an api_key in serialised data was ignored", path)
        else:
            self.problem(path, f"expected a model config object, got {_kind(value)}")
            return None
        try:
            return iModel.from_spec(spec)
        except (TypeError, ValueError) as exc:
            self.problem(path, str(exc))
            return None


# -------------------------------------------------------------------- clone


def clone(branch: Projected, sender: str | UUID | None = None, *, into: Callable[..., B]) -> B:
    """A new, unstarted branch with a copy of ``branch``'s conversation.

    Every message (the system message too) gets a fresh id, ``sender`` (default:
    the source branch's id) as its sender and the clone's id as its recipient;
    action responses point at their requests' new ids. Tools are registered
    on the clone; models are shared, an aliased parse model stays aliased and
    a distinct one distinct. ``metadata`` is ``{"clone_from": {"id", "user",
    "created_at", "progression"}}`` of the source. Nothing live is copied:
    logs and log config, memory, providers and their report, capabilities,
    operations, observer, hooks and ownership.

    ``into`` is the class of the clone (``Branch``).

    Raises:
        TypeError: ``sender`` is not a str or UUID.
    """
    if sender is not None and not isinstance(sender, str | UUID):
        raise TypeError(f"sender must be a str or UUID, got {type(sender).__name__}")
    clone_id = uuid.uuid4()
    origin = str(sender) if sender is not None else str(branch.id)
    source = branch.messages.to_list()
    new_ids = {message.id: new_id() for message in source}
    messages = [_clone_message(m, new_ids, origin, str(clone_id)) for m in source]
    aliased = branch.parse_model is branch.chat_model
    return into(
        id=clone_id,
        user=branch.user,
        messages=messages,
        tools=list(branch.acts) or None,
        chat_model=branch.chat_model,
        parse_model=None if aliased else branch.parse_model,
        metadata={"clone_from": clone_source(branch, source)},
        mailbox_size=branch.mailbox_size,
        budget=branch.budget,
    )


def clone_source(branch: Projected, messages: Iterable[RoledMessage]) -> dict[str, Any]:
    """The reduced reference to a clone's source: id, user, created_at, progression."""
    return {
        "id": str(branch.id),
        "user": branch.user,
        "created_at": branch.created_at,
        "progression": [str(message.id) for message in messages],
    }


def _clone_message(
    message: RoledMessage, new_ids: Mapping[UUID, UUID], sender: str, recipient: str
) -> RoledMessage:
    changes: dict[str, Any] = {
        "id": new_ids[message.id],
        "sender": sender,
        "recipient": recipient,
        "metadata": copy.deepcopy(dict(message.metadata)),
    }
    if isinstance(message, ActionResponse) and message.action_request_id in new_ids:
        changes["action_request_id"] = new_ids[typing.cast(UUID, message.action_request_id)]
    return attrs.evolve(message, **changes)
