"""The demo team across two host processes of a local Ray cluster.

    python examples/cluster.py          # needs the ray extra: pip install 'pride[ray]'

The same researcher, critic and planner as ``examples/demo.py``, built by the
same factories, but each in a host process of a Ray cluster::

    this process          Cluster: places branches, streams the answer; a Session
                          supervising the planner (a host crash is its crash)
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
from pride import ActionRequest, AssistantResponse, BranchStarted, MessageAdded, Run, RunEnd
from pride.cluster import Cluster


async def main() -> None:
    show = demo.view()
    show.header("scripted models, in two host processes of a local Ray cluster")
    turns = 0

    def count(signal: RunEnd) -> None:
        nonlocal turns
        turns += 1

    def show_teamwork(signal: MessageAdded) -> None:
        """What the researcher and the critic do inside the planner's turn, across processes."""
        message, who = signal.message, signal.branch_name
        if who == "planner" or who is None:
            return
        if isinstance(message, ActionRequest):
            arguments = ", ".join(f"{key}={value!r}" for key, value in message.arguments.items())
            show.calls(who, message.function, arguments)
        elif isinstance(message, AssistantResponse):
            show.says(who, message.text)

    storage = tempfile.mkdtemp(prefix="pride-cluster-example-")
    namespace = f"pride-example-{uuid.uuid4().hex[:8]}"
    supervised: list[str] = []
    async with (
        Cluster(num_cpus=2, namespace=namespace, storage=storage) as cluster,
        pride.Session(name="here") as session,
    ):
        cluster.observe(MessageAdded, handler=show_teamwork)
        cluster.observe(RunEnd, handler=count)
        session.observe(BranchStarted, handler=lambda s: supervised.append(s.branch_name))
        await cluster.spawn(demo.make_researcher, name="researcher", host="library")
        await cluster.spawn(demo.make_critic, name="critic", host="library")
        # The planner is a child of this process's session: were its host to die,
        # the session would restart it per its strategy, from the host's store.
        planner = await cluster.supervise(session, demo.make_planner, name="planner", host="desk")

        show.ask(demo.TASK)
        answering = False
        async with pride.stream(planner, Run(demo.TASK)) as items:
            async for item in items:
                if isinstance(item, str):  # a token chunk, from the planner's host process
                    if not answering:
                        show.answer_starts()
                        answering = True
                    show.chunk(item)
                elif isinstance(item, ActionRequest):
                    show.calls("planner", item.function, None)
                elif isinstance(item, AssistantResponse) and answering:
                    show.answer_ends()
                    answering = False
        hosts = cluster.hosts
    show.summary(
        f"{turns} turns served by branches in {len(hosts)} host processes "
        f"({', '.join(hosts)}), this process (pid {os.getpid()}) placing and streaming; "
        f"its session supervised {', '.join(supervised)}."
    )


if __name__ == "__main__":
    trio.run(main)
