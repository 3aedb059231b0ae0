"""Recent turns as a waterfall: model calls, tool calls, and a nested ask under the tool call
that made it, from what the tracer slot reports."""

from __future__ import annotations

import httpx

from tests import chromium
from tests.console.conftest import selector, sign_in, wait_for
from tests.serve.conftest import SCOPED, Served

KEEP = 100
"""Top-level turns the recorder keeps, as docs/console.md promises."""


async def test_a_nested_ask_appears_under_its_parent_tool_call(
    browser: chromium.Browser, console: Served, api: httpx.AsyncClient
) -> None:
    """``lead`` calls its ``consult`` tool, which asks ``scout``: the waterfall shows
    lead's turn, its model calls and the tool call, and scout's turn under that call."""
    page = await sign_in(browser, console)
    await wait_for(page, "document.querySelector('#status[data-status=live]')")
    asked = await api.post(
        "/v1/branches/lead/ask",
        json={"command": {"type": "Operate", "instruction": "consult", "actions": True}},
    )
    assert asked.status_code == 200, asked.text
    turn_id = asked.json()["turn_id"]
    top = f"#waterfall .span[data-kind=turn][data-turn-id='{turn_id}']"
    nested = (
        f"{top} > ul > .span[data-kind=tool][data-name=consult]"
        " > ul > .span[data-kind=turn][data-branch=scout]"
    )
    await wait_for(
        page,
        f"document.querySelector({selector(top)})?.dataset.outcome === 'done'"
        f" && document.querySelector({selector(nested)})",
    )
    rows = await page.evaluate(
        f"[...document.querySelectorAll({selector(top + ' .span')})]"
        ".map(s => [s.dataset.kind, s.dataset.name, s.dataset.outcome])"
    )
    assert rows == [
        ["model", "scripted", "done"],
        ["tool", "consult", "done"],
        ["turn", "scout", "done"],
        ["model", "scripted", "done"],
        ["model", "scripted", "done"],
    ]
    bars = await page.evaluate(
        f"[...document.querySelectorAll({selector(top + ' .bar')})]"
        ".map(b => [parseFloat(b.style.left), parseFloat(b.style.width)])"
    )
    assert all(0 <= left <= 100 and 0 <= width <= 100.001 for left, width in bars)
    traces = (await api.get("/v1/traces", params={"limit": 5})).json()["traces"]
    (mine,) = [t for t in traces if t["turn_id"] == turn_id]
    tool = mine["children"][1]
    assert tool["kind"] == "tool"
    assert tool["detail"]["arguments"] == "question='what is there'"
    (scout,) = tool["children"]
    assert scout["start_ms"] >= tool["start_ms"]
    assert scout["start_ms"] + scout["duration_ms"] <= tool["start_ms"] + tool["duration_ms"]
    assert page.errors == []


async def test_the_recorder_keeps_the_latest_turns_and_only_what_a_token_reaches(
    console: Served, api: httpx.AsyncClient
) -> None:
    """Past ``KEEP`` top-level turns the oldest go; they come newest first; a token
    whose scope reaches none of these branches sees no trace and no flow."""
    asked = []
    for number in range(KEEP + 5):
        answer = await api.post(
            "/v1/branches/critic/ask",
            json={"command": {"type": "ChatAndRecord", "instruction": f"turn {number}"}},
        )
        asked.append(answer.json()["turn_id"])
    traces = (await api.get("/v1/traces", params={"limit": KEEP})).json()["traces"]
    assert len(traces) == KEEP
    assert [t["turn_id"] for t in traces] == asked[::-1][:KEEP]
    assert (await api.get("/v1/traces", params={"limit": KEEP + 1})).status_code == 400
    scoped = {"Authorization": f"Bearer {SCOPED}"}
    assert (await api.get("/v1/traces", headers=scoped)).json()["traces"] == []
    assert (await api.get("/v1/flows", headers=scoped)).json()["flows"] == []
