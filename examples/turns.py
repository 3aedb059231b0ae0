"""Turns, nesting, cancellation and control on one branch — runs on the scripted model.

``python examples/turns.py``
"""

from __future__ import annotations

import trio

import pride
from pride import Branch, Chat, ChatAndRecord, LoopDirective, ScriptedModel


class Printer:
    """A tiny observer: prints each signal as it arrives."""

    def dispatch(self, signal: pride.Signal) -> None:
        turn = getattr(signal, "turn_id", None)
        label = str(turn)[:8] if turn else "-"
        print(f"    signal {type(signal).__name__:<13} turn {label}")


def reply(request: pride.llm.ModelRequest) -> str:
    return f"(answer to: {request.messages[-1]['content']})"


async def summarise(branch: Branch, *, topic: str) -> str:
    """A registered operation: it calls its own branch, which runs inline in this turn."""
    first = await branch.chat(f"list facts about {topic}")
    second = await branch.chat(f"summarise {first}")
    return second


loop_started = trio.Event()


async def counting_loop(branch: Branch) -> int:
    """A loop honouring out-of-band control between rounds."""
    rounds = 0
    loop_started.set()
    while True:
        rounds += 1
        await trio.sleep(0.01)
        try:
            pride.check_control(branch)
        except pride.StopStream:
            return rounds


async def main() -> None:
    async with Branch(name="demo", chat_model=ScriptedModel(reply), observer=Printer()) as branch:
        print("1. concurrent asks on one branch run one at a time, in order:")
        async with trio.open_nursery() as nursery:
            for text in ("first", "second", "third"):
                nursery.start_soon(pride.ask, branch, ChatAndRecord(text))
        print("   history:", [m.text for m in branch.messages])

        print("2. nested calls join the turn (one RunStart/RunEnd pair):")
        branch.register_operation("summarise", summarise)
        print("  ", await branch.call("summarise", topic="trio"))

        print("3. a timeout cancels and finalises the turn; the branch serves the next one:")

        async def never(request: pride.llm.ModelRequest) -> str:
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        slow = ScriptedModel(never)
        try:
            await pride.ask(branch, Chat("never", chat_model=slow), timeout=0.05)
        except trio.TooSlowError:
            print("   timed out; next:", await branch.chat("still there?"))

        print("4. control addresses the running turn by id:")
        branch.register_operation("loop", counting_loop)
        reply_handle = await pride.send(branch, pride.Call("loop"))
        await loop_started.wait()
        await trio.sleep(0.05)  # let the loop run a few rounds
        branch.control(LoopDirective.CANCEL, reason="enough", turn_id=reply_handle.turn_id)
        print("   loop ended cleanly after", await reply_handle.result(), "rounds")

        print("5. streaming: the turn advances as the caller consumes:")
        async with pride.stream(branch, Chat("stream me")) as chunks:
            print("   chunks:", [chunk async for chunk in chunks])


if __name__ == "__main__":
    trio.run(main)
