"""Virtual branches behind `pride serve`'s native routes (the server in this process).

A request naming ``kind/key`` is resolved (and the branch activated) before
it waits for one of ``--max-concurrent``'s places; the branch may be
passivated meanwhile (by hand, or for ``max_active``), and the request must
still reach it, activated again, never be answered ``BranchClosed``.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

import pride
from pride import Branch, BranchActivated, ChatAndRecord, Session
from pride.serve import ServeOptions
from tests.helpers import Gate, echo_model
from tests.serve.conftest import TOKEN, in_process

ASK = {"command": {"type": "ChatAndRecord", "instruction": "hello"}}


def user_branch(key: str) -> Branch:
    return Branch(system=f"you help {key}", chat_model=echo_model())


@pytest.mark.parametrize("passivation", ["manual", "max_active"])
async def test_a_request_waiting_for_a_place_reaches_its_branch_passivated_meanwhile(
    tmp_path: Path, passivation: str
) -> None:
    """An ask resolved to ``user/ada`` waits for the one place (``max_concurrent=1``)
    while ``user/ada`` is passivated (by hand, or for ``max_active=1`` by another
    caller's ``user/bo``): it is served by a fresh activation. It was answered 503
    ``BranchClosed`` by the stopped branch it had been resolved to, so a client
    naming many keys made other clients' requests fail."""
    gate = Gate()
    async with Session(store=tmp_path / "s.db") as session:
        await session.spawn(Branch(name="gate", chat_model=gate.model))
        await session.virtual("user", user_branch, max_active=1)
        activated = trio.Event()
        session.observe(BranchActivated, handler=lambda signal: activated.set())
        options = ServeOptions(port=0, max_concurrent=1, queue_wait=60.0)
        async with in_process(session, options) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http,
                trio.open_nursery() as nursery,
            ):
                answers: dict[str, httpx.Response] = {}

                async def post(label: str, path: str, body: object) -> None:
                    answers[label] = await http.post(path, json=body)

                gated = {"command": {"type": "ChatAndRecord", "instruction": "hold"}}
                nursery.start_soon(post, "gate", "/v1/branches/gate/ask", gated)
                await gate.started.wait()  # the gate's ask holds the one place
                nursery.start_soon(post, "ada", "/v1/branches/user%2Fada/ask", ASK)
                await activated.wait()
                await trio.testing.wait_all_tasks_blocked()  # ada's ask waits for the place
                if passivation == "manual":
                    assert await session.passivate("user/ada")
                else:  # user/bo takes the one slot: idle user/ada is passivated for it
                    assert await session.ask("user/bo", ChatAndRecord("hi")) == "re: hi"
                assert "user/ada" not in {b.name for b in session.branches}
                gate.release("hold")
        assert answers["gate"].status_code == 200, answers["gate"].text
        ada = answers["ada"]
        assert ada.status_code == 200, ada.text
        assert ada.json()["result"] == "re: hello"
        await session.ask("user/ada", ChatAndRecord("again"))
        texts = [m.text for m in session.get_branch("user/ada").messages]
        assert texts == ["you help ada", "hello", "re: hello", "again", "re: again"]


def gated_user(gate: Gate) -> object:
    def factory(key: str) -> Branch:
        return Branch(chat_model=gate.model, mailbox_size=1)

    return factory


async def test_a_full_virtual_mailbox_names_its_capacity(tmp_path: Path) -> None:
    """``user/ada`` busy with one turn and its one-envelope mailbox full: ``send_nowait``
    to its address, and each route of ``pride serve`` naming it, refuse with
    ``MailboxFull`` naming the mailbox's real capacity (1). The server's refusals
    said 0: a VirtualRef has no ``mailbox_size`` of its own."""
    gate = Gate()
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", gated_user(gate))
        ref = session.ref("user/ada")
        running = await pride.send(ref, ChatAndRecord("hold"))
        await gate.started.wait()
        queued = await pride.send(ref, ChatAndRecord("queued"))
        with pytest.raises(pride.MailboxFull) as info:
            pride.send_nowait(ref, ChatAndRecord("one too many"))
        assert info.value.capacity == 1 and "(capacity 1)" in str(info.value)
        assert ref.capacity == 1  # live: its mailbox; not yet live: the activation's queue
        assert session.ref("user/bo").capacity == 1024
        options = ServeOptions(port=0, queue_wait=0.05)
        async with in_process(session, options) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
                for route in ("ask", "send", "stream"):
                    refused = await http.post(f"/v1/branches/user%2Fada/{route}", json=ASK)
                    assert refused.status_code == 503, (route, refused.text)
                    error = refused.json()["error"]
                    assert error["type"] == "MailboxFull", (route, error)
                    assert "(capacity 1)" in error["message"], (route, error)
        gate.release("hold")
        gate.release("queued")
        assert await running.result() == "reply to hold"
        assert await queued.result() == "reply to queued"
