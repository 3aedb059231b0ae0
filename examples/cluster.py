"""The demo team across two host processes of a local Ray cluster.

    python examples/cluster.py          # needs the ray extra: pip install 'pride[ray]'

The same researcher, critic and planner as ``examples/demo.py``, built by the
same factories, but each in a host process of a Ray cluster::

    this process          Cluster: places branches, streams the answer
    host "library"        researcher, critic
    host "desk"           planner (its tools ask the library by name, across processes)

Each factory runs on its host, so tools and models are made there; only
commands, messages and signals (plain JSON) cross between the processes.
``Cluster()`` starts a local Ray cluster; ``Cluster(address="auto")`` joins one
started with ``ray start --head`` (see docs/cluster.md).
"""

from __future__ import annotations

import os
import tempfile
import uuid

import demo  # examples/demo.py: run from this directory's parent or this directory
import trio

import pride
from pride import ActionRequest, AssistantResponse, MessageAdded, Run, RunEnd
from pride.cluster import Cluster


async def main() -> None:
    print("pride cluster demo: the team in two host processes of a local Ray cluster")
    turns = 0

    def count(signal: RunEnd) -> None:
        nonlocal turns
        turns += 1

    storage = tempfile.mkdtemp(prefix="pride-cluster-example-")
    namespace = f"pride-example-{uuid.uuid4().hex[:8]}"
    async with Cluster(num_cpus=2, namespace=namespace, storage=storage) as cluster:
        cluster.observe(MessageAdded, handler=demo.show_teamwork)
        cluster.observe(RunEnd, handler=count)
        await cluster.spawn(demo.make_researcher, name="researcher", host="library")
        await cluster.spawn(demo.make_critic, name="critic", host="library")
        planner = await cluster.spawn(demo.make_planner, name="planner", host="desk")
        print(f"hosts: {', '.join(cluster.hosts)} (this process: pid {os.getpid()})")

        print(f"\nyou -> planner: {demo.TASK}\n")
        answering = False
        async with pride.stream(planner, Run(demo.TASK)) as items:
            async for item in items:
                if isinstance(item, str):
                    if not answering:
                        print("\nplanner: ", end="")
                        answering = True
                    print(item, end="", flush=True)
                elif isinstance(item, ActionRequest):
                    print(f"  planner calls {item.function}")
                elif isinstance(item, AssistantResponse):
                    print()
                    answering = False
    print(f"\n{turns} turns served by branches in {len(cluster.hosts)} host processes.")


if __name__ == "__main__":
    trio.run(main)
