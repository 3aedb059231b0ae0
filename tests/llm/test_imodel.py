"""Tests for iModel configuration: providers, specs, serialisation, keys."""

from __future__ import annotations

import pytest

from pride.errors import AuthenticationFailed
from pride.llm import (
    DEFAULT_CHAT_MODEL,
    ModelRequest,
    RetryPolicy,
    ScriptedModel,
    default_chat_model,
    iModel,
)


class TestProviders:
    """Provider and model resolution."""

    def test_provider_prefix_is_split_off(self):
        """'openai/gpt-4.1-mini' is provider openai, model gpt-4.1-mini."""
        model = iModel("openai/gpt-4.1-mini")
        assert (model.provider, model.model, model.api_format) == (
            "openai",
            "gpt-4.1-mini",
            "openai",
        )
        assert model.base_url == "https://api.openai.com/v1"
        assert model.supports_native_tools and model.supports_structured_output

    def test_anthropic_uses_the_messages_format(self):
        """Anthropic models speak the Messages format and lack native structured output."""
        model = iModel("anthropic/claude-sonnet-4")
        assert model.api_format == "anthropic"
        assert model.supports_native_tools and not model.supports_structured_output

    def test_only_the_first_segment_is_the_provider(self):
        """OpenRouter model names keep their own slashes."""
        model = iModel("openrouter/anthropic/claude-sonnet-4")
        assert (model.provider, model.model) == ("openrouter", "anthropic/claude-sonnet-4")

    def test_an_explicit_provider_keeps_the_model_name_whole(self):
        """provider= takes the model string as is (minus a matching prefix)."""
        assert iModel("meta-llama/Llama-3", provider="vllm", base_url="http://h/v1").model == (
            "meta-llama/Llama-3"
        )
        assert iModel("groq/llama3", provider="groq").model == "llama3"

    def test_a_bare_model_name_means_openai(self):
        """A model name without a provider is an OpenAI model."""
        assert iModel("gpt-4o").provider == "openai"

    @pytest.mark.parametrize(
        ("spec", "url"),
        [
            ("ollama/llama3.2", "http://localhost:11434/v1"),
            ("lmstudio/qwen", "http://localhost:1234/v1"),
            ("groq/llama3", "https://api.groq.com/openai/v1"),
        ],
    )
    def test_known_openai_compatible_providers_have_default_urls(self, spec, url):
        """Ollama, LM Studio and Groq are reached at their usual addresses."""
        model = iModel(spec)
        assert model.base_url == url and model.api_format == "openai"

    def test_vllm_needs_a_base_url(self):
        """vLLM has no default address."""
        with pytest.raises(ValueError, match="base_url"):
            iModel("vllm/some-model")
        assert iModel("vllm/some-model", base_url="http://gpu:8000/v1").base_url == (
            "http://gpu:8000/v1"
        )

    def test_unknown_providers_need_a_base_url_and_then_speak_openai(self):
        """An unknown provider with base_url is OpenAI-compatible; without, an error."""
        with pytest.raises(ValueError, match="unknown provider 'acme'"):
            iModel("acme/m1")
        model = iModel("acme/m1", base_url="http://acme.local/v1")
        assert (model.provider, model.api_format) == ("acme", "openai")
        assert not model.supports_structured_output

    def test_a_missing_model_name_is_an_error(self):
        """A provider without a model name is rejected."""
        with pytest.raises(ValueError, match="no model name"):
            iModel(provider="openai")

    def test_request_options_are_kept(self):
        """Extra keyword arguments become request options."""
        assert iModel("openai/gpt-4o", temperature=0.2, max_tokens=10).request_options == {
            "temperature": 0.2,
            "max_tokens": 10,
        }


class TestDefaults:
    """The default chat model."""

    def test_default_is_gpt_4_1_mini(self, monkeypatch):
        """Without PRIDE_CHAT_MODEL the default is openai/gpt-4.1-mini."""
        monkeypatch.delenv("PRIDE_CHAT_MODEL", raising=False)
        assert DEFAULT_CHAT_MODEL == "openai/gpt-4.1-mini"
        model = default_chat_model()
        assert (model.provider, model.model) == ("openai", "gpt-4.1-mini")
        assert iModel().model == "gpt-4.1-mini"
        assert iModel.from_spec(None).model == "gpt-4.1-mini"

    def test_environment_chooses_the_default(self, monkeypatch):
        """PRIDE_CHAT_MODEL names the default, 'scripted' included."""
        monkeypatch.setenv("PRIDE_CHAT_MODEL", "anthropic/claude-3-5-haiku")
        assert default_chat_model().provider == "anthropic"
        monkeypatch.setenv("PRIDE_CHAT_MODEL", "scripted")
        assert isinstance(default_chat_model(), ScriptedModel)


class TestSerialisation:
    """to_dict, from_dict, from_spec, copy."""

    def test_round_trip_keeps_the_configuration(self):
        """from_dict(to_dict()) rebuilds an equal configuration."""
        model = iModel(
            "groq/llama3",
            timeout=5.0,
            limit_requests=10,
            limit_tokens=1000,
            queue_capacity=7,
            capacity_refresh_time=30.0,
            concurrency_limit=2,
            retry=RetryPolicy(max_retries=1, jitter=0),
            temperature=0,
        )
        data = model.to_dict()
        again = iModel.from_dict(data)
        assert again.to_dict() == data
        assert again.retry == RetryPolicy(max_retries=1, jitter=0)

    def test_from_dict_does_not_mutate_its_input(self):
        """from_dict leaves the caller's dict untouched."""
        data = iModel("openai/gpt-4o", temperature=1).to_dict()
        snapshot = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
        iModel.from_dict(data)
        assert data == snapshot

    def test_from_dict_rejects_unknown_fields(self):
        """Unknown keys are an error, not silently dropped."""
        with pytest.raises(ValueError, match="colour"):
            iModel.from_dict({"provider": "openai", "model": "gpt-4o", "colour": "red"})

    def test_from_spec_accepts_models_strings_and_dicts(self):
        """from_spec returns an iModel as is and builds from strings and dicts."""
        model = iModel("openai/gpt-4o")
        assert iModel.from_spec(model) is model
        assert iModel.from_spec("anthropic/claude-sonnet-4").provider == "anthropic"
        assert iModel.from_spec({"provider": "ollama", "model": "llama3"}).provider == "ollama"
        with pytest.raises(TypeError):
            iModel.from_spec(42)  # type: ignore[arg-type]

    def test_copy_keeps_the_key_and_configuration(self, monkeypatch):
        """copy() has the same configuration and explicit key, and fresh counters."""
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        model = iModel("openai/gpt-4o", api_key="sk-copied-key-123456", temperature=0)
        twin = model.copy()
        assert twin is not model and twin.to_dict() == model.to_dict()
        assert twin.api_key() == "sk-copied-key-123456"


class TestKeys:
    """Where keys come from."""

    def test_key_is_read_from_the_environment_at_call_time(self, monkeypatch):
        """Without api_key=, the provider's variable is read when needed."""
        model = iModel("openai/gpt-4o")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-000000")
        assert model.api_key() == "sk-from-env-000000"
        monkeypatch.setenv("OPENAI_API_KEY", "sk-changed-111111")
        assert model.api_key() == "sk-changed-111111"

    @pytest.mark.parametrize(
        ("spec", "env"),
        [
            ("openai/gpt-4o", "OPENAI_API_KEY"),
            ("anthropic/claude-sonnet-4", "ANTHROPIC_API_KEY"),
            ("groq/llama3", "GROQ_API_KEY"),
            ("openrouter/x/y", "OPENROUTER_API_KEY"),
        ],
    )
    async def test_a_missing_key_names_the_variable(self, monkeypatch, spec, env):
        """A call without a key fails with AuthenticationFailed naming the variable."""
        monkeypatch.delenv(env, raising=False)
        async with iModel(spec) as model:
            with pytest.raises(AuthenticationFailed, match=env):
                await model.invoke(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
        assert model.statistics().failures == 1
        assert model.key_env == env

    def test_a_model_without_a_key_names_no_variable(self):
        assert ScriptedModel(["x"]).key_env is None

    def test_local_servers_need_no_key(self, monkeypatch):
        """Ollama and unknown OpenAI-compatible servers work without a key."""
        monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
        assert iModel("ollama/llama3").api_key() is None
        assert iModel("acme/m", base_url="http://x/v1").api_key() is None
