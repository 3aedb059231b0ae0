"""pride.context's and pride.memory's public faces: __all__ names exactly their public names.

(What they may import is checked with every other package's rules in
tests/test_layering.py.)"""

from __future__ import annotations

import types

import pytest

import pride.context
import pride.memory

PACKAGES = [pride.context, pride.memory]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_all_names_the_public_attributes(package: types.ModuleType) -> None:
    """__all__ lists exactly the public non-module names (ruff's RUF022 keeps it sorted)."""
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(package.__all__) == public
    assert len(set(package.__all__)) == len(package.__all__)
