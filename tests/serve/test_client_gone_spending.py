"""``pride serve`` and clients that leave mid-turn: the turns they cancel spend
their session's budget.

A client that disconnects cancels its turn. Before, a plain model call
cancelled in flight counted nothing, so a client asking and leaving again and
again spent without limit under the session's token budget: the provider read
every prompt. The server runs in the test's process, against the real loopback
provider holding each reply.
"""

from __future__ import annotations

import httpx
import trio
import trio.testing

from pride import Branch, Budget, RunFailed, Session
from pride.llm import RetryPolicy, iModel
from pride.testing import Fault, openai_server

from .conftest import TOKEN, in_process


async def test_clients_that_leave_mid_ask_spend_the_session_budget_until_it_refuses() -> None:
    """``pride serve``'s clients disconnecting mid-ask spend the session's budget until
    it refuses."""
    async with openai_server(lambda body: Fault.slow_first_byte(60.0, "late")) as provider:
        model = iModel(
            "openai/gpt-4o-mini",
            base_url=provider.base_url,
            api_key="test",
            retry=RetryPolicy(max_retries=0),
        )
        async with Session("spend", budget=Budget(max_input_tokens=20)) as session:
            await session.spawn(Branch(name="talker", chat_model=model))
            ended = trio.Event()
            session.observe(RunFailed, handler=lambda _: ended.set())
            async with in_process(session) as (_, url):
                headers = {"Authorization": f"Bearer {TOKEN}"}
                body = {"command": {"type": "Chat", "instruction": "tell me everything"}}
                async with httpx.AsyncClient(base_url=url, headers=headers) as http:

                    async def ask() -> None:
                        await http.post("/v1/branches/talker/ask", json=body)

                    for _client in range(10):
                        ended = trio.Event()
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(ask)
                            await trio.testing.wait_all_tasks_blocked()  # the provider holds it
                            nursery.cancel_scope.cancel()  # the client disconnects
                        with trio.fail_after(5):
                            await ended.wait()  # its turn was cancelled
                        if session.usage.input_tokens > 20:
                            break
                    spent = session.usage
                    assert spent.input_tokens > 20, spent  # else the next ask would wait
                    refused = await http.post("/v1/branches/talker/ask", json=body)
            assert provider.request_count == spent.model_calls < 10
            assert refused.status_code != 200
            assert "max_input_tokens" in refused.text, refused.text
