"""The screenshots of docs/console.md, made by this test from the page as the browser shows it.

The test serves examples/console.py with ``--console``, gives it work (a turn
with a nested ask, a flow, a refund waiting for approval), opens a conversation, and
captures the page and its waterfall with the DevTools protocol
(``Page.captureScreenshot``). It always writes them under its temporary
directory and checks them; with ``PRIDE_UPDATE_SCREENSHOTS=1`` it writes them
into docs/images/ too, which is how the committed ones are remade::

    PRIDE_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/console/test_screenshots.py
"""

from __future__ import annotations

import base64
import math
import os
import shutil
import struct
from pathlib import Path

import httpx

from tests import chromium
from tests.console.conftest import wait_for
from tests.serve.conftest import ROOT, TOKEN, start_server

IMAGES = ROOT / "docs" / "images"
SHOTS = ("console.png", "console-waterfall.png")
WIDTH, HEIGHT = 1280, 1000


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    return width, height


async def test_the_console_s_screenshots(browser: chromium.Browser, tmp_path: Path) -> None:
    """The page with a tree, a conversation, an approval and a waterfall, and the
    waterfall alone; the docs' copies are these when asked to be remade."""
    operate = {"type": "Operate", "actions": True}
    with start_server(tmp_path, "--console", app="examples/console.py:build") as served:
        async with httpx.AsyncClient(base_url=served.url, headers=served.headers()) as api:
            for instruction in (
                "Is invoice INV-7 paid?",
                "Please review case C-7",
                "I was charged twice",
            ):
                await api.post(
                    "/v1/branches/triage/ask",
                    json={"command": {**operate, "instruction": instruction}},
                )
        page = await browser.new_page()
        await page.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )
        await page.goto(f"{served.url}/?token={TOKEN}")
        await wait_for(page, "document.querySelector('#status[data-status=live]')")
        await wait_for(page, "document.querySelector('#approvals .approval')")
        await wait_for(page, "document.querySelectorAll('#waterfall li.trace').length === 3")
        await wait_for(
            page, "document.querySelectorAll('#flows g.node[data-state=completed]').length === 3"
        )
        await page.click("li.branch[data-branch=triage] .name")
        await wait_for(
            page, "document.querySelector('#conversation[data-loaded] .message .body strong')"
        )
        await page.evaluate("document.activeElement.blur(), window.scrollTo(0, 0)")
        whole = tmp_path / SHOTS[0]
        await page.screenshot(whole)
        box = await page.evaluate(
            "(() => { const r = document.getElementById('waterfall-panel')"
            ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()"
        )
        # The panel's box in whole pixels, enclosing it: a fractional clip is snapped to
        # pixels by Chromium itself, a pixel either way depending on where it falls.
        left, top = math.floor(box[0]), math.floor(box[1])
        width = math.ceil(box[0] + box[2]) - left
        height = math.ceil(box[1] + box[3]) - top
        shot = await page.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "clip": {"x": left, "y": top, "width": width, "height": height, "scale": 1},
            },
        )
        part = tmp_path / SHOTS[1]
        part.write_bytes(base64.b64decode(shot["data"]))
        assert page.errors == []
    assert _png_size(whole) == (WIDTH, HEIGHT)
    assert _png_size(part) == (width, height)
    if os.environ.get("PRIDE_UPDATE_SCREENSHOTS") == "1":
        IMAGES.mkdir(exist_ok=True)
        for name in SHOTS:
            shutil.copyfile(tmp_path / name, IMAGES / name)
    for name in SHOTS:  # the docs show these: they must be there
        assert _png_size(IMAGES / name)[0] > 0
