"""The public surface: ``pride.__all__`` matches what the package exports."""

from __future__ import annotations

import pride
import pride.messages


def test_all_lists_every_public_name() -> None:
    """__all__ names exactly the non-underscore attributes that are not submodules."""
    import types

    public = {
        name
        for name, value in vars(pride).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(pride.__all__) == public


def test_all_is_sorted_and_importable() -> None:
    """Every name in __all__ resolves."""
    for name in pride.__all__:
        assert hasattr(pride, name), name


def test_messages_reexported() -> None:
    """Message classes import from both pride and pride.messages."""
    assert pride.Chat is pride.messages.Chat
    assert pride.InvalidMessage is pride.messages.InvalidMessage


def test_version() -> None:
    """The package has a version string."""
    assert isinstance(pride.__version__, str)
