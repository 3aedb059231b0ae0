"""pride.llm's and pride.testing's public faces: complete, sorted, rehomed exports.

(Their layer, their import circles and asyncio are checked with every other
package in tests/test_layering.py.)"""

from __future__ import annotations

import types

import pytest

import pride.llm
import pride.testing


@pytest.mark.parametrize("module", [pride.llm, pride.testing])
def test_exports_are_sorted_complete_and_rehomed(module):
    """__all__ is sorted, names exactly the public attributes, and classes name their module
    (``pride`` itself for those ``pride`` exports too: ``pride.iModel``)."""
    assert module.__all__ == sorted(module.__all__)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(module.__all__) == public
    for name in module.__all__:
        obj = getattr(module, name)
        if isinstance(obj, type):
            home = "pride" if getattr(pride, name, None) is obj else module.__name__
            assert obj.__module__ == home, name


def test_the_interface_the_runtime_relies_on_is_exported():
    """The names other pride layers import from pride.llm are all there."""
    expected = {
        "iModel",
        "ScriptedModel",
        "ScriptedReply",
        "ModelRequest",
        "ModelResponse",
        "ModelStream",
        "ToolCall",
        "Usage",
        "RateLimiter",
        "RetryPolicy",
        "default_chat_model",
        "DEFAULT_CHAT_MODEL",
    }
    assert expected <= set(pride.llm.__all__)
    assert {"openai_server", "Fault", "LoopbackServer", "RecordedRequest"} <= set(
        pride.testing.__all__
    )
