"""Fast random (version 4) UUIDs for message and turn ids.

``uuid.uuid4()`` reads 16 bytes from the OS on every call, a syscall that
costs more than the rest of a short turn's bookkeeping. These ids only need
to be unique, not unguessable, so they come from the ``random`` module's
generator (seeded from the OS at import), with the version and variant bits
of a uuid4 set. Do not use them as secrets.
"""

from __future__ import annotations

import os
import random
from uuid import UUID, SafeUUID

__all__ = ["new_id"]

_random = random.Random()
if hasattr(os, "register_at_fork"):  # a forked child would repeat its parent's ids
    os.register_at_fork(after_in_child=_random.seed)
_VERSION_4 = 0x4000 << 64
_VARIANT_RFC4122 = 0x8000 << 48
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_SET = _VERSION_4 | _VARIANT_RFC4122
_UNKNOWN = SafeUUID.unknown  # an enum member looked up once: the lookup costs more than the id
# Looked up once too: two ids are made per turn, and these lookups cost more than the rest.
_bits = _random.getrandbits
_new = object.__new__
_set = object.__setattr__


def new_id() -> UUID:
    """A fresh random UUID (version 4 layout)."""
    uid = _new(UUID)
    _set(uid, "int", (_bits(128) & _CLEAR) | _SET)
    _set(uid, "is_safe", _UNKNOWN)
    return uid
