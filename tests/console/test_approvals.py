"""Approvals in the console: a pending tool call shows with Approve and Deny, and a click
resolves the turn."""

from __future__ import annotations

import httpx

from tests import chromium
from tests.console.conftest import selector, sign_in, wait_for
from tests.serve.conftest import Served


async def _pending(api: httpx.AsyncClient, page: chromium.Page) -> str:
    sent = await api.post(
        "/v1/branches/pilot/send",
        json={"command": {"type": "Operate", "instruction": "use the tool", "actions": True}},
    )
    assert sent.status_code == 202, sent.text
    turn_id: str = sent.json()["turn_id"]
    waiting = f"#approvals .approval[data-turn-id='{turn_id}'][data-call-id=call-1]"
    text = await wait_for(page, f"document.querySelector({selector(waiting)})")
    assert "launch" in text
    assert "moon" in text
    # The turn's last signal is in the tree too: the page is done moving, so a
    # click lands where the button was measured.
    suspended = f"li.branch[data-branch=pilot] .last-turn[data-turn-id='{turn_id}']"
    await wait_for(
        page, f"document.querySelector({selector(suspended)})?.dataset.outcome === 'suspended'"
    )
    return turn_id


async def _settled(api: httpx.AsyncClient, page: chromium.Page, turn_id: str) -> dict[str, object]:
    ended = f"li.branch[data-branch=pilot] .last-turn[data-turn-id='{turn_id}']"
    await wait_for(
        page,
        f"document.querySelector({selector(ended)})?.dataset.outcome === 'done'"
        f" && !document.querySelector({selector(f'.approval[data-turn-id={turn_id!r}]')})",
    )
    followed = await api.get(f"/v1/turns/{turn_id}")
    assert followed.status_code == 200
    answer: dict[str, object] = followed.json()
    return answer


async def test_an_approval_is_approved_by_a_click_and_the_turn_completes(
    browser: chromium.Browser, console: Served, api: httpx.AsyncClient
) -> None:
    """The waiting call shows with its arguments; clicking Approve runs the tool and
    the turn goes on to its end; the pending call is gone from the page and the server."""
    page = await sign_in(browser, console)
    await wait_for(page, "document.querySelector('#status[data-status=live]')")
    turn_id = await _pending(api, page)
    await page.click(f".approval[data-turn-id='{turn_id}'] button.approve")
    answer = await _settled(api, page, turn_id)
    assert answer["state"] == "done"
    assert answer["result"]["output"] == "the tool answered"  # type: ignore[index]
    assert (await api.get("/v1/approvals")).json()["approvals"] == []
    history = (await api.get("/v1/branches/pilot/messages", params={"limit": 500})).json()
    outputs = [m.get("output") for m in history["messages"] if m["type"] == "ActionResponse"]
    assert outputs[-1] == "launched at moon"
    assert page.errors == []


async def test_a_denial_by_a_click_reaches_the_model(
    browser: chromium.Browser, console: Served, api: httpx.AsyncClient
) -> None:
    """Clicking Deny continues the turn with the call refused: the tool never runs,
    the model sees the refusal, the turn completes."""
    page = await sign_in(browser, console)
    await wait_for(page, "document.querySelector('#status[data-status=live]')")
    turn_id = await _pending(api, page)
    await page.click(f".approval[data-turn-id='{turn_id}'] button.deny")
    answer = await _settled(api, page, turn_id)
    assert answer["state"] == "done"
    history = (await api.get("/v1/branches/pilot/messages", params={"limit": 500})).json()
    last = [m for m in history["messages"] if m["type"] == "ActionResponse"][-1]
    assert last["output"] is None
    assert "console" in last["error"]
    assert page.errors == []
