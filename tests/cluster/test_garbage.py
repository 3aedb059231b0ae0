"""What a remote envelope leaves for the caller's garbage collector: nothing.

The caller's process is the user's: pride does not touch its collector's
settings, so it must not make garbage the collector has to find. An envelope
in a reference cycle (its reply holding it as holder and canceller, it
holding the reply) or a Ray future in one (its done-callback referring back
to it) survives until a collection, and with 1,000 asks in flight every
collection walks them all and promotes them to the old generations, whose
full collections walk the whole process (Ray's modules included). So every
step of an envelope's life that ends well, on the caller, is checked here:
asked, sent and awaited, sent without waiting, streamed, and the link's
deliveries and long polls meanwhile, and an ask that raises (the
exception's traceback holds the frames of ``ask`` and ``Reply.result``: the
reply lets go of the exception once it raised it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pride
from pride import Call, Chat, Run
from pride.cluster import Cluster
from tests.helpers import frames_holding, saving_garbage

from .conftest import NAMESPACE

ECHO = "tests.cluster.factories:echo"
WORKER = "tests.cluster.factories:worker"


def _ours(objects: list[object]) -> list[str]:
    """pride's objects, its functions, and the futures it waits on through Ray."""
    names = set()
    for found in objects:
        kind = type(found)
        module = getattr(found, "__module__", None) if callable(found) else None
        if kind.__module__.startswith("pride") or kind.__module__ == "concurrent.futures._base":
            names.add(kind.__qualname__)
        elif isinstance(module, str) and module.startswith("pride"):
            names.add(f"{module}.{getattr(found, '__qualname__', '?')}")
    return sorted(names)


async def test_a_remote_envelope_leaves_no_reference_cycle(cluster: Cluster, name: str) -> None:
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    assert await pride.ask(ref, Chat("warm up")) == "echo: warm up"
    command = Chat("hi")
    with saving_garbage() as garbage:
        for _ in range(20):
            assert await pride.ask(ref, command) == "echo: hi"
        replies = [await pride.send(ref, Chat(f"sent {i}")) for i in range(5)]
        assert [await reply.result() for reply in replies] == [f"echo: sent {i}" for i in range(5)]
        nowait = pride.send_nowait(ref, command)
        assert await nowait.result() == "echo: hi"
        async with pride.stream(ref, Run("stream me")) as items:
            streamed = [item async for item in items]
        assert "".join(item for item in streamed if isinstance(item, str)) == "echo: stream me"
    assert _ours(garbage) == []


async def test_a_remote_ask_that_raises_leaves_no_reference_cycle(
    cluster: Cluster, name: str
) -> None:
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    with pytest.raises(ValueError):
        await pride.ask(ref, Call("fail", kind="value"))
    with saving_garbage() as garbage:
        for _ in range(5):
            with pytest.raises(ValueError, match="bad value on the host"):
                await pride.ask(ref, Call("fail", kind="value"))
    assert _ours(garbage) == []


class _Raised(Exception):
    """An error of the ``async with Cluster`` block itself."""


async def test_an_error_leaving_a_cluster_block_is_not_held_by_its_frames(
    ray_session: Path,
) -> None:
    with pytest.raises(_Raised) as raised:
        async with Cluster(
            namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
        ):
            raise _Raised("in the cluster's block")
    assert frames_holding(raised.value) == []
