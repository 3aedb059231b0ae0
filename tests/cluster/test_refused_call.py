"""A delivery Ray refuses at once (``.remote()`` raising) fails what it carried with
HostLost, is logged, and the link serves on, still up.

Made to happen for real, with no timing: Ray counts the calls a process has
pending on an actor and, past the actor's ``max_pending_calls``, makes
``.remote()`` raise ``PendingCallsLimitExceeded`` there and then, whichever
handle it is called on. The host here (`SilentHost`) answers only ``hello``:
the link's beacon call, its poll and a first delivery stay pending, so with
a limit of three the next delivery is refused, every time.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import pytest
import trio
import trio.testing

import pride
from pride import Chat, HostLost
from pride.cluster import Cluster

from .conftest import start_host_actor
from .hostile import SilentHost


async def test_a_delivery_ray_refuses_at_once_fails_its_envelopes_with_host_lost(
    cluster: Cluster, ray_session: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    host = f"silent-{name}"
    handle = await trio.to_thread.run_sync(
        functools.partial(start_host_actor, SilentHost, host, name, max_pending_calls=3)
    )
    try:
        ref = await cluster.lookup(name)  # connected: its beacon call and poll are pending
        await trio.testing.wait_all_tasks_blocked()
        first = await pride.send(ref, Chat("never answered"))
        await trio.testing.wait_all_tasks_blocked()  # its delivery is the third pending call
        with caplog.at_level(logging.ERROR, logger="pride.cluster"):
            for _ in range(2):  # refused each time, and the link still up
                with pytest.raises(HostLost, match="PendingCallsLimitExceeded") as refused:
                    await pride.ask(ref, Chat("refused"))
                assert "Ray refused the call" in str(refused.value)
        assert "refused a delivery of 1 items" in caplog.text
        assert not first.done
    finally:
        await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=True))
    with pytest.raises(HostLost):  # the host's end is its loss
        await first.result()
