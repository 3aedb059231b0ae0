"""A ``pride serve --console`` subprocess, and a headless Chromium signed in to it.

One server serves the whole test session (tests/console/app.py: every test
leaves it as it found it: a turn it holds, it releases); each test gets a
Chromium of its own (tests/chromium.py: the system's browser, no network).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests import chromium
from tests.serve.conftest import TOKEN, Served, start_server

APP = "tests/console/app.py:build"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here that opens a browser is a browser test (`chromium.needed`):
    skipped, and said so at the end of the run, where there is no Chromium."""
    here = Path(__file__).parent
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()) and here in item.path.parents:
            item.add_marker(chromium.needed)


@pytest.fixture(scope="session")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The console's server, shared by the tests that do not stop it."""
    with start_server(tmp_path_factory.mktemp("console"), "--console", app=APP) as server:
        yield server


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[chromium.Browser]:
    """A headless Chromium with a fresh profile (no cookie yet)."""
    (tmp_path / "profile").mkdir()
    async with chromium.launch(tmp_path / "profile") as launched:
        yield launched


@pytest.fixture
async def api(console: Served) -> AsyncIterator[httpx.AsyncClient]:
    """The native API, with the full-access token."""
    async with httpx.AsyncClient(base_url=console.url, headers=console.headers()) as client:
        yield client


async def sign_in(browser: chromium.Browser, served: Served) -> chromium.Page:
    """A tab that opened the console's link (``/?token=...``) and shows the tree."""
    page = await browser.new_page()
    await page.goto(f"{served.url}/?token={TOKEN}")
    await wait_for(page, "document.querySelector('#tree li.branch')")
    return page


WAIT = 15.0
"""Seconds a condition may take to hold: far above what any takes here (a few
milliseconds), so only a page that is stuck fails on time."""


async def wait_for(page: chromium.Page, condition: str) -> Any:
    """Await, in the page, the first truthy value of the JavaScript ``condition``
    (an element stands for its text), checked now and on every change of the
    document (no polling, no sleep).

    Raises:
        AssertionError: it did not hold within `WAIT` seconds; the message has
            what the page showed then.
    """
    script = (
        "new Promise(resolve => {"
        " const check = () => { try { const v = (" + condition + ");"
        "  return v instanceof Node ? (v.textContent || ' ') : v; } catch (e) { return null; } };"
        " const first = check(); if (first) return resolve(first);"
        " const observer = new MutationObserver(() => {"
        "  const value = check(); if (value) { observer.disconnect(); resolve(value); } });"
        " observer.observe(document, {subtree: true, childList: true, attributes: true,"
        "  characterData: true}); })"
    )
    with trio.move_on_after(WAIT):
        return await page.evaluate(script)
    shown = await page.evaluate("document.body.innerText")
    raise AssertionError(
        f"the page never showed {condition}\nerrors: {page.errors}\nit showed:\n{shown}"
    )


def selector(text: str) -> str:
    """``text`` as a JavaScript string literal, for ``querySelector`` inside a condition."""
    return json.dumps(text)
