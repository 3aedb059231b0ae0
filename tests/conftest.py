"""Shared test configuration."""

from __future__ import annotations

from hypothesis import settings

# Property tests run on every `make test`: keep them bounded and deterministic.
settings.register_profile("pride", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("pride")
