"""An app for ``pride run`` that can hold its store's creation at one SQL statement.

With ``PRIDE_TEST_HOLD_SQL`` set, importing this module traces every SQLite
connection (:mod:`tests.store.crashing`) and blocks before the first
statement starting with that text, so a test can ``kill -9`` the process
while its store is half created.
"""

from __future__ import annotations

import os

from pride import Branch, Session
from tests.helpers import echo_model
from tests.store import crashing

if os.environ.get("PRIDE_TEST_HOLD_SQL"):
    crashing.install(hold=os.environ["PRIDE_TEST_HOLD_SQL"])


async def build(session: Session) -> None:
    """One branch, ``ada``, on the scripted echo model."""
    await session.spawn(Branch(name="ada", chat_model=echo_model()))
