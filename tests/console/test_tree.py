"""The console's tree, live: a real headless Chromium against a real ``pride serve --console``."""

from __future__ import annotations

import uuid

import httpx
import trio

from tests import chromium
from tests.console.app import BRANCHES, COST
from tests.console.conftest import selector, sign_in, wait_for
from tests.serve.conftest import Served


async def test_every_branch_of_the_tree_shows(browser: chromium.Browser, console: Served) -> None:
    """The link's token leaves the address; every branch shows, the child session's
    under it; the page asked nothing of any other origin; its console shows no error."""
    page = await sign_in(browser, console)
    assert await page.evaluate("location.href") == f"{console.url}/"
    shown = await page.evaluate(
        "[...document.querySelectorAll('li.branch')].map(b => b.dataset.branch)"
    )
    assert sorted(shown) == sorted(BRANCHES)
    nested = await page.evaluate(
        "[...document.querySelectorAll('ul[data-session=research] li.branch')]"
        ".map(b => b.dataset.branch)"
    )
    assert sorted(nested) == ["critic", "scout"]
    states = await page.evaluate(
        "[...document.querySelectorAll('li.branch')].map(b => b.dataset.state)"
    )
    assert set(states) == {"idle"}
    await wait_for(page, "document.querySelector('#status[data-status=live]')")
    assert all(url.startswith(console.url) for url in page.requests), page.requests
    assert page.errors == []


async def test_a_turn_started_through_the_api_appears_within_a_second_and_ends_with_its_cost(
    browser: chromium.Browser, console: Served, api: httpx.AsyncClient
) -> None:
    """A turn sent over the API shows as the branch's turn in flight, with its
    elapsed time, within 1 s of its start; once it ends, its cost shows."""
    page = await sign_in(browser, console)
    await wait_for(page, "document.querySelector('#status[data-status=live]')")
    key = uuid.uuid4().hex
    sent = await api.post(
        "/v1/branches/writer/send", json={"command": {"type": "Run", "instruction": f"hold {key}"}}
    )
    assert sent.status_code == 202, sent.text
    turn_id = sent.json()["turn_id"]
    started = trio.current_time()
    in_flight = f"li.branch[data-branch=writer][data-state=busy] .turn[data-turn-id='{turn_id}']"
    with trio.fail_after(1.0):
        await wait_for(page, f"document.querySelector({selector(in_flight)})")
    shown_after = trio.current_time() - started
    assert shown_after < 1.0
    elapsed = await wait_for(
        page, f"document.querySelector({selector(in_flight + ' .elapsed')}).textContent"
    )
    assert elapsed.endswith(" s")

    released = await api.post(
        "/v1/branches/scout/ask", json={"command": {"type": "Run", "instruction": f"release {key}"}}
    )
    assert released.status_code == 200, released.text
    ended = f"li.branch[data-branch=writer] .last-turn[data-turn-id='{turn_id}']"
    text = await wait_for(page, f"document.querySelector({selector(ended)})")
    assert "done" in text
    assert f"${COST}" in text
    cost = await page.evaluate(f"document.querySelector({selector(ended)}).dataset.cost")
    assert float(cost) == COST
    assert page.errors == []
