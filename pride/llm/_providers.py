"""Known providers: where they live, how they authenticate, what they support.

A model is named ``"provider/model"`` (``"openai/gpt-4.1-mini"``,
``"openrouter/anthropic/claude-sonnet-4"``: only the first segment is the
provider). A provider not listed here is reached through the OpenAI-compatible
endpoint when a ``base_url`` is given; its key, if any, comes from
``<PROVIDER>_API_KEY``.
"""

from __future__ import annotations

import os

import attrs

__all__ = [
    "CHAT_MODEL_ENV",
    "DEFAULT_CHAT_MODEL",
    "OPENAI_APIS",
    "OPENAI_REASONING_MODELS",
    "PROVIDERS",
    "ProviderInfo",
    "default_model_spec",
    "default_openai_api",
    "provider_info",
    "reasons",
    "split_model",
]

#: The chat model used when neither the caller nor ``PRIDE_CHAT_MODEL`` names one.
DEFAULT_CHAT_MODEL = "openai/gpt-4.1-mini"

#: The environment variable naming the default chat model.
CHAT_MODEL_ENV = "PRIDE_CHAT_MODEL"


@attrs.frozen
class ProviderInfo:
    """What pride knows about one provider.

    Attributes:
        name: the provider's name as used in model strings.
        api_format: ``"openai"`` (chat completions) or ``"anthropic"`` (Messages).
        base_url: the default API root, or ``None`` when the user must give one.
        key_env: the environment variable holding the API key.
        key_required: whether a call without a key fails before sending
            (local servers usually need none).
        native_tools: the endpoint accepts tool schemas and returns tool calls.
        structured_output: the endpoint accepts an OpenAI ``json_schema``
            response format; otherwise pride asks for fenced JSON in the
            system text.
    """

    name: str
    api_format: str
    base_url: str | None
    key_env: str | None
    key_required: bool = True
    native_tools: bool = True
    structured_output: bool = True


PROVIDERS: dict[str, ProviderInfo] = {
    info.name: info
    for info in (
        ProviderInfo("openai", "openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        ProviderInfo(
            "anthropic",
            "anthropic",
            "https://api.anthropic.com/v1",
            "ANTHROPIC_API_KEY",
            structured_output=False,
        ),
        ProviderInfo("groq", "openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        ProviderInfo("openrouter", "openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        ProviderInfo(
            "deepseek",
            "openai",
            "https://api.deepseek.com/v1",
            "DEEPSEEK_API_KEY",
            structured_output=False,
        ),
        ProviderInfo(
            "ollama", "openai", "http://localhost:11434/v1", "OLLAMA_API_KEY", key_required=False
        ),
        ProviderInfo(
            "lmstudio", "openai", "http://localhost:1234/v1", "LMSTUDIO_API_KEY", key_required=False
        ),
        ProviderInfo("vllm", "openai", None, "VLLM_API_KEY", key_required=False),
        ProviderInfo("scripted", "openai", None, None, key_required=False, native_tools=True),
    )
}


def provider_info(name: str, base_url: str | None) -> ProviderInfo:
    """The `ProviderInfo` for ``name``; an unknown name needs a ``base_url``.

    Raises:
        ValueError: the provider is unknown and no ``base_url`` was given, or a
            known provider without a default URL (vLLM) was given none.
    """
    info = PROVIDERS.get(name)
    if info is None:
        if not base_url:
            raise ValueError(
                f"unknown provider {name!r}: give base_url= to use it as an OpenAI-compatible "
                f"server, or use one of {', '.join(sorted(PROVIDERS))}"
            )
        env = "".join(c if c.isalnum() else "_" for c in name.upper()) + "_API_KEY"
        return ProviderInfo(name, "openai", None, env, key_required=False, structured_output=False)
    if info.base_url is None and not base_url and info.name != "scripted":
        raise ValueError(f"provider {name!r} has no default address: give base_url=")
    return info


#: The two OpenAI wire formats an ``"openai"``-format model can speak.
OPENAI_APIS = ("chat_completions", "responses")

#: OpenAI's reasoning model families, by name prefix. They keep their reasoning
#: across the calls of a tool loop only over the Responses API (as encrypted
#: reasoning items sent back), so an ``"openai"`` model of these families speaks
#: it unless told otherwise; every other model, and every other provider (whose
#: compatible servers may lack ``/responses``), speaks chat completions.
OPENAI_REASONING_MODELS = ("o1", "o3", "o4", "gpt-5", "codex")


def reasons(provider: str, model: str) -> bool:
    """Whether ``model`` of ``provider`` is one of OpenAI's reasoning models.

    ``gpt-5-chat-latest`` and its kin are the non-reasoning chat variants.
    """
    return (
        provider == "openai"
        and model.lower().startswith(OPENAI_REASONING_MODELS)
        and "-chat" not in model.lower()
    )


def default_openai_api(provider: str, model: str) -> str:
    """``"responses"`` for OpenAI's reasoning models, else ``"chat_completions"``."""
    return "responses" if reasons(provider, model) else "chat_completions"


def split_model(model: str | None, provider: str | None, base_url: str | None) -> tuple[str, str]:
    """Resolve ``(provider, model)`` from a model string and an optional provider.

    ``"openai/gpt-4.1-mini"`` gives ``("openai", "gpt-4.1-mini")``. With an
    explicit ``provider``, a matching prefix is stripped and the rest is the
    model name as is. A bare name without a provider means OpenAI; the bare
    name ``"scripted"`` means the scripted provider. With no model at all, the
    default chat model is used.

    Raises:
        ValueError: the prefix is an unknown provider and no ``base_url`` was given.
    """
    if model is None and provider is None:
        model = default_model_spec()
    if provider is not None:
        provider = provider.lower()
        if model is None:
            return provider, provider if provider == "scripted" else ""
        prefix = provider + "/"
        return provider, model[len(prefix) :] if model.lower().startswith(prefix) else model
    assert model is not None
    head, sep, rest = model.partition("/")
    if sep:
        provider_info(head.lower(), base_url)  # an unknown provider needs a base_url
        return head.lower(), rest
    if model == "scripted":
        return "scripted", "scripted"
    return "openai", model


def default_model_spec() -> str:
    """``$PRIDE_CHAT_MODEL`` when set and non-empty, else `DEFAULT_CHAT_MODEL`."""
    return os.environ.get(CHAT_MODEL_ENV, "").strip() or DEFAULT_CHAT_MODEL
