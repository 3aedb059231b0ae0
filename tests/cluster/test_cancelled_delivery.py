"""A delivery Ray cancels while it waits for answers leaves nothing behind on its host.

A caller that gives up on a ``deliver`` call (``ray.cancel``) ends the call's
wait on its host. Its waiter must go with it: `HostActor.post` hands answers to
the oldest waiting delivery of their connection, and a stale waiter there would
take the wake meant for a live delivery (or the connection's poll), leaving the
answers to wait for the poll's timeout.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path

import pytest
import trio

from pride import Chat
from pride.cluster import Cluster
from pride.cluster.caller.driver import wait_ref
from pride.cluster.wire.encoding import dumps, loads
from pride.messages import unstructure

from .conftest import NAMESPACE, start_host_actor

ECHO = "tests.cluster.factories:echo"


async def test_a_cancelled_delivery_leaves_no_waiter_and_the_next_is_answered(
    cluster: Cluster, ray_session: Path, name: str
) -> None:
    import ray

    from .lingering import LingeringHost

    host = f"linger-{name}"
    handle = await trio.to_thread.run_sync(
        functools.partial(
            start_host_actor,
            LingeringHost,
            host,
            host,
            str(ray_session),
            {"namespace": NAMESPACE},
            max_concurrency=1000,
            max_task_retries=0,
        )
    )
    try:
        await cluster.spawn(ECHO, name=name, host=host)
        conn = uuid.uuid4().hex
        idle = handle.deliver.remote(dumps({"conn": conn, "seq": 0, "items": []}))
        await wait_ref(handle.until_delivery_waits.remote(conn))
        await trio.to_thread.run_sync(ray.cancel, idle)
        with pytest.raises(ray.exceptions.TaskCancelledError):
            await wait_ref(idle)
        assert await wait_ref(handle.deliveries_waiting.remote(conn)) is None
        send = {
            "k": "send",
            "id": uuid.uuid4().hex,
            "b": name,
            "mode": "ask",
            "cmd": unstructure(Chat("after")),
        }
        with trio.fail_after(60):  # a stale waiter would take its wake: an hour's wait
            delivered = await wait_ref(
                handle.deliver.remote(dumps({"conn": conn, "seq": 1, "items": [send]}))
            )
        items = [item for batch in loads(delivered, "delivery")["out"] for item in batch["items"]]
        assert [item["value"] for item in items if item["k"] == "done"] == ["echo: after"]
        assert await wait_ref(handle.deliveries_waiting.remote(conn)) is None
    finally:
        await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=True))
