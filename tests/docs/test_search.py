"""The built site's search works as a reader uses it: served locally, with no network.

The site is served by the standard library's HTTP server (what docs/contributing.md
tells a reader to run) and read by a real headless Chromium (tests/chromium.py)
that can reach nothing but loopback. A person's key presses go into the search
box, and the test waits, on the page's own DOM mutations, for results.

Why not ``chromium --dump-dom --virtual-time-budget=...``: virtual time runs
ahead whenever the page's main thread is idle, and the search index is built
by a web worker (about a second of real work for this site) that virtual time
does not wait for, so the dump is taken while the box still says "Initializing
search" although search works.

Opened from disk (``file://``) the site has no search: Chromium refuses to
start a web worker from a file, and Material for MkDocs' ``offline`` plugin
works around that with a shim it loads from a CDN, which no network rules out.
docs/contributing.md says to serve the site instead.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
import trio

from tests import chromium

# Resolves once the result list has entries, with what a reader sees of them.
_RESULTS = """
new Promise(resolve => {
  const list = document.querySelector(".md-search-result__list");
  const meta = document.querySelector(".md-search-result__meta");
  const report = () => resolve({
    meta: meta.textContent.trim(),
    links: [...list.querySelectorAll("a.md-search-result__link")].map(a => a.href),
  });
  if (list.children.length) return report();
  new MutationObserver((_, observer) => {
    if (list.children.length) { observer.disconnect(); report(); }
  }).observe(list, {childList: true});
})
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are asserted on from the browser's side; the log would be noise."""


@asynccontextmanager
async def _serve(directory: Path) -> AsyncIterator[str]:
    """Serve ``directory`` on a free loopback port; yields the origin."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(server.shutdown)
            await trio.to_thread.run_sync(thread.join)
            server.server_close()


def _page_text(site: Path, url: str) -> str:
    """The HTML of the built page a result links to."""
    path = urlsplit(url).path.lstrip("/")
    file = site / path / "index.html" if path == "" or path.endswith("/") else site / path
    return file.read_text(encoding="utf-8")


@chromium.needed
async def test_search_finds_pages_on_the_served_site_with_no_network(
    built_site: Path, tmp_path: Path
) -> None:
    """Typing a word lists the pages that hold it, and nothing is fetched from off the machine."""
    async with _serve(built_site) as origin, chromium.launch(tmp_path) as browser:
        page = await browser.new_page()
        await page.goto(f"{origin}/")
        await page.evaluate("document.querySelector('[data-md-component=search-query]').focus()")
        await page.type("mailbox")
        try:
            results = await page.evaluate(_RESULTS)
        except trio.TooSlowError:
            meta = await page.evaluate(
                "document.querySelector('.md-search-result__meta').textContent.trim()"
            )
            pytest.fail(f"no search results in {chromium.TIMEOUT:.0f} s: the box says {meta!r}")

    assert re.fullmatch(r"\d+ matching documents?", results["meta"]), results["meta"]
    assert results["links"], results
    for link in results["links"]:
        assert link.startswith(f"{origin}/"), link
        assert "mailbox" in _page_text(built_site, urljoin(origin, link)).lower(), link
    external = [url for url in page.requests if not url.startswith((f"{origin}/", "data:"))]
    assert not external, f"the site asked for resources off the machine: {external}"
