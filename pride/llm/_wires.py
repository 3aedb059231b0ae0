"""Which wire format an HTTP model speaks, and the endpoint that speaks it.

A provider's ``api_format`` says how its conversation is shaped (OpenAI's
chat-shaped messages, or Anthropic's Messages). OpenAI-format models speak one
of two wire formats over it, ``openai_api``: chat completions, which every
compatible server has, or the Responses API, which OpenAI's reasoning models
need to keep their reasoning through a tool loop. So the default is the
Responses API for those models (`reasons`) and chat completions for the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._anthropic import AnthropicEndpoint, checked_options
from ._http import HttpAccess, HttpEndpoint
from ._openai import OpenAIEndpoint
from ._providers import OPENAI_APIS, ProviderInfo, default_openai_api, reasons
from ._reading import ResponseLimits
from ._reasoning import check_reasoning_options
from ._responses import ResponsesEndpoint

__all__ = ["http_endpoint", "model_options", "openai_api_for"]


def openai_api_for(
    info: ProviderInfo, model: str, openai_api: str | None, options: Mapping[str, Any]
) -> str | None:
    """The OpenAI wire format ``model`` speaks (``None`` for an Anthropic model),
    having checked that the request ``options`` suit it.

    Raises:
        ValueError: an unknown wire format, one asked of an Anthropic model, or a
            bad reasoning option (see ``pride.llm._reasoning``).
    """
    openai_api = _wire(info, model, openai_api)
    check_reasoning_options(options, responses=openai_api == "responses")
    return openai_api


def model_options(info: ProviderInfo, options: Mapping[str, Any]) -> dict[str, Any]:
    """A model's request options as it sends them: for an Anthropic model, ``thinking``
    in the API's form, checked with the options it clashes with (``pride.llm._thinking``).

    ``prompt_cache`` (``pride.llm._caching``) is checked too; it places Anthropic's
    breakpoints, so another wire format refuses it (OpenAI caches prompts by itself).

    Raises:
        ValueError: a thinking or prompt_cache option the API would refuse, or a
            prompt_cache option on a model that is not Anthropic's.
    """
    if info.api_format == "anthropic":
        return checked_options(dict(options))
    if "prompt_cache" in options and info.name != "scripted":
        raise ValueError(
            "prompt_cache places Anthropic's cache breakpoints; "
            f"{info.name!r} models cache prompts (if at all) without them"
        )
    return dict(options)


def _wire(info: ProviderInfo, model: str, openai_api: str | None) -> str | None:
    if info.api_format != "openai":
        if openai_api is not None:
            raise ValueError(f"openai_api applies to OpenAI-format models, not {info.name!r} ones")
        return None
    if openai_api is None:
        return default_openai_api(info.name, model)
    if openai_api not in OPENAI_APIS:
        raise ValueError(
            f"openai_api must be one of {', '.join(map(repr, OPENAI_APIS))} (or None), "
            f"got {openai_api!r}"
        )
    return openai_api


def http_endpoint(
    info: ProviderInfo,
    openai_api: str | None,
    *,
    model: str,
    base_url: str | None,
    access: HttpAccess,
    limits: ResponseLimits,
) -> HttpEndpoint:
    """The endpoint of an HTTP model of provider ``info`` speaking ``openai_api``."""
    assert base_url is not None  # provider_info refused a provider without one
    kind: type[AnthropicEndpoint | OpenAIEndpoint | ResponsesEndpoint]
    if info.api_format == "anthropic":
        kind = AnthropicEndpoint
    elif openai_api == "responses":
        kind = ResponsesEndpoint
    else:
        kind = OpenAIEndpoint
    endpoint = kind(
        provider=info.name, model=model, base_url=base_url, access=access, limits=limits
    )
    endpoint.structured_output = info.structured_output
    if isinstance(endpoint, ResponsesEndpoint):
        endpoint.reasoning_model = reasons(info.name, model)
    return endpoint
