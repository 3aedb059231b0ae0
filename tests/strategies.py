"""Hypothesis strategies for every type that travels, derived from attrs fields."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any
from uuid import UUID

import attrs
from hypothesis import strategies as st

from pride.messages import Budget, RoledMessage, codec, commands

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
# A decoded Call refuses model configurations in its arguments (keys such as
# base_url); arbitrary argument names stay clear of them.
# "budget" is the Call's own field, never one of its arguments.
_MODEL_KEYS = {"base_url", "api_key", "provider", "key_env", "budget", *commands.MODEL_FIELDS}
call_kwargs = st.dictionaries(
    st.text(max_size=8).filter(lambda key: key not in _MODEL_KEYS),
    st.recursive(
        json_scalars,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(
                st.text(max_size=8).filter(lambda key: key not in _MODEL_KEYS),
                children,
                max_size=4,
            )
        ),
        max_leaves=12,
    ),
    max_size=4,
)


_counts = st.none() | st.integers(min_value=0, max_value=2**53)
_amounts = st.none() | st.floats(min_value=0, allow_nan=False, allow_infinity=False)
budgets = st.builds(
    Budget,
    max_input_tokens=_counts,
    max_output_tokens=_counts,
    max_cost_usd=_amounts,
    max_model_calls=_counts,
    max_tool_calls=_counts,
    max_duration=_amounts,
)
"""Every valid Budget (limits are non-negative and finite)."""


def for_type(tp: Any) -> st.SearchStrategy[Any]:
    """A strategy producing wire-valid values of annotation ``tp``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        marker = tp.__metadata__[0]
        return {
            "pride:json": json_values,
            # On the wire a model is only ever named (a configuration is refused).
            "pride:model": st.none() | st.text(max_size=20),
            "pride:response_format": st.none() | json_objects,
            "pride:live": st.none(),
        }[marker]
    if tp is Any:
        return json_values
    if tp is Budget:
        return budgets
    if tp is commands.ToolSelection:
        return st.booleans() | st.lists(st.text(max_size=8), max_size=3).map(tuple)
    if tp is str:
        return st.text(max_size=30)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(min_value=-(2**53), max_value=2**53)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is UUID:
        return st.uuids()
    if tp is RoledMessage:
        return st.one_of([instances(cls) for cls in codec._MESSAGE_TYPES])
    if tp is commands.Decision:
        return st.one_of([instances(cls) for cls in codec._DECISION_TYPES])
    if origin is typing.Literal:
        return st.sampled_from(typing.get_args(tp))
    if origin in (typing.Union, __import__("types").UnionType):
        return st.one_of([for_type(arg) for arg in typing.get_args(tp)])
    if tp is type(None):
        return st.none()
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(tp)
        return st.lists(for_type(item), max_size=3).map(tuple)
    if origin in (Mapping, dict, typing.Mapping):
        _key, value = typing.get_args(tp)
        # "model" is refused in a decoded command's request_options: keep clear of it.
        keys = st.text(max_size=8).filter(lambda key: key != "model")
        return st.dictionaries(keys, for_type(value), max_size=3)
    if attrs.has(tp):
        return instances(tp)
    raise NotImplementedError(f"no strategy for {tp!r}")


def instances(cls: type) -> st.SearchStrategy[Any]:
    """Instances of an attrs class with every init field drawn from its type."""
    hints = typing.get_type_hints(cls, include_extras=True)
    if cls is commands.Call:
        return st.builds(
            lambda op, budget, kw: commands.Call(op, budget=budget, **kw),
            st.text(max_size=10),
            st.none() | budgets,
            call_kwargs,
        )
    kwargs = {field.alias: for_type(hints[field.name]) for field in attrs.fields(cls) if field.init}
    return st.fixed_dictionaries(kwargs).map(lambda kw: cls(**kw))
