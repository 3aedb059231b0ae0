"""A branch's conversation in the console: rendered safely, paged, with its usage and cost."""

from __future__ import annotations

import httpx
import trio

from tests import chromium
from tests.console.app import ARCHIVED, COST
from tests.console.conftest import selector, sign_in, wait_for
from tests.serve.conftest import Served

# True when any element of the conversation could run a script: a script or
# other active element, an event-handler attribute, or a link that is not http(s).
_ACTIVE = """
(() => {
  const view = document.getElementById("conversation");
  const elements = [...view.querySelectorAll("*")];
  return {
    active: elements.filter(e => ["SCRIPT", "IMG", "IFRAME", "OBJECT", "EMBED", "SVG", "STYLE",
      "LINK", "META", "FORM", "INPUT", "BASE"].includes(e.tagName.toUpperCase()))
      .map(e => e.tagName),
    handlers: elements.flatMap(e => [...e.attributes].map(a => a.name))
      .filter(name => name.startsWith("on")),
    links: [...view.querySelectorAll("a")].map(a => a.href),
    pwned: window.__pwned === undefined ? null : String(window.__pwned),
  };
})()
"""


async def _open(page: chromium.Page, branch: str) -> None:
    await page.click(f"li.branch[data-branch={branch}] .name")
    await wait_for(
        page, f"document.querySelector('#conversation[data-branch={branch}][data-loaded]')"
    )


async def test_model_output_cannot_inject_a_script(
    browser: chromium.Browser, console: Served, api: httpx.AsyncClient
) -> None:
    """An answer holding script tags, an onerror image, javascript: links and an
    inline handler is shown as text and safe markup: nothing in it runs, no
    element that could run anything is made, and its markdown is rendered."""
    asked = await api.post(
        "/v1/branches/critic/ask",
        json={"command": {"type": "ChatAndRecord", "instruction": "inject"}},
    )
    assert asked.status_code == 200, asked.text
    page = await sign_in(browser, console)
    await _open(page, "critic")
    answer = "#conversation .message[data-role=assistant]:last-of-type .body"
    await wait_for(page, f"document.querySelector({selector(answer + ' strong')})")
    text = await page.evaluate(f"document.querySelector({selector(answer)}).textContent")
    assert "<script>" in text  # shown, as characters
    assert "onerror" in text
    found = await page.evaluate(_ACTIVE)
    assert found["active"] == []
    assert found["handlers"] == []
    assert found["pwned"] is None
    assert found["links"] == ["https://example.com/docs"]
    assert (
        await page.evaluate(f"document.querySelector({selector(answer + ' strong')}).textContent")
        == "bold"
    )
    assert await page.evaluate(
        f"[...document.querySelectorAll({selector(answer + ' code')})].map(c => c.textContent)"
    ) == ["code", "<script>window.__pwned = 'code'</script>"]
    assert page.errors == []


async def test_a_ten_thousand_message_conversation_opens_within_two_seconds(
    browser: chromium.Browser, console: Served
) -> None:
    """The latest page shows within 2 s of the click; earlier pages load on demand,
    and the page never holds more than it was asked for."""
    page = await sign_in(browser, console)
    started = trio.current_time()
    with trio.fail_after(2.0):
        await _open(page, "archive")
        last = f"answer {ARCHIVED // 2 - 1}"
        await wait_for(
            page,
            "[...document.querySelectorAll('#conversation .message .body')]"
            f".some(m => m.textContent === {selector(last)})",
        )
    assert trio.current_time() - started < 2.0
    shown = await page.evaluate("document.querySelectorAll('#conversation .message').length")
    assert 0 < shown <= 200
    total = await page.evaluate("document.querySelector('#conversation').dataset.total")
    assert int(total) == ARCHIVED + 1  # with the system message
    await page.click("#conversation button.earlier")
    await wait_for(
        page, f"document.querySelectorAll('#conversation .message').length === {2 * shown}"
    )
    first = await page.evaluate(
        "document.querySelector('#conversation .message .body').textContent"
    )
    assert first != "question 0"  # still paged: the start is further up
    strong = await page.evaluate(
        "document.querySelector('#conversation .message[data-role=assistant] .body strong')"
        ".textContent"
    )
    assert strong.isdigit()
    assert page.errors == []


async def test_a_conversation_shows_its_usage_and_cost_and_follows_new_turns(
    browser: chromium.Browser, console: Served, api: httpx.AsyncClient
) -> None:
    """The open conversation's header has the branch's tokens and cost; a turn
    asked over the API meanwhile appears in it, and the cost goes up by its cost."""
    page = await sign_in(browser, console)
    await _open(page, "scout")
    before = float(
        await wait_for(page, "document.querySelector('#conversation .usage').dataset.cost || '0'")
    )
    asked = await api.post(
        "/v1/branches/scout/ask",
        json={"command": {"type": "ChatAndRecord", "instruction": "a new question"}},
    )
    assert asked.status_code == 200, asked.text
    await wait_for(
        page,
        "[...document.querySelectorAll('#conversation .message .body')]"
        ".some(m => m.textContent === 'echo: a new question')",
    )
    after = await wait_for(
        page,
        "(() => { const c = Number(document.querySelector('#conversation .usage').dataset.cost);"
        f" return c > {before} ? c : null; }})()",
    )
    assert abs(after - before - COST) < 1e-9
    assert page.errors == []
