"""A flow as a graph in the console, its nodes' states live."""

from __future__ import annotations

import uuid

import httpx

from tests import chromium
from tests.console.conftest import selector, sign_in, wait_for
from tests.serve.conftest import Served


def _node(name: str, state: str) -> str:
    return f"#flows .flow[data-name=survey] g.node[data-node={name}][data-state={state}]"


async def test_a_flow_shows_as_a_graph_with_its_nodes_states_live(
    browser: chromium.Browser, console: Served, api: httpx.AsyncClient
) -> None:
    """While ``gather`` is held the graph shows it running and ``scan`` completed;
    once released, ``report`` runs after both and the graph has its two edges."""
    page = await sign_in(browser, console)
    await wait_for(page, "document.querySelector('#status[data-status=live]')")
    key = uuid.uuid4().hex
    sent = await api.post(
        "/v1/branches/lead/send",
        json={"command": {"type": "Operate", "instruction": f"flow {key}", "actions": True}},
    )
    assert sent.status_code == 202, sent.text
    await wait_for(
        page,
        f"document.querySelector({selector(_node('gather', 'running'))})"
        f" && document.querySelector({selector(_node('scan', 'completed'))})",
    )
    assert (
        await page.evaluate(f"document.querySelector({selector(_node('report', 'completed'))})")
        is None
    )
    released = await api.post(
        "/v1/branches/writer/ask",
        json={"command": {"type": "ChatAndRecord", "instruction": f"release {key}"}},
    )
    assert released.status_code == 200, released.text
    await wait_for(page, f"document.querySelector({selector(_node('report', 'completed'))})")
    await wait_for(page, f"document.querySelector({selector(_node('gather', 'completed'))})")
    edges = await page.evaluate(
        "[...document.querySelector('#flows .flow[data-name=survey]')"
        ".querySelectorAll('path.edge')].map(e => e.dataset.from + '>' + e.dataset.to).sort()"
    )
    assert edges == ["gather>report", "scan>report"]
    labels = await page.evaluate(
        "[...document.querySelectorAll('#flows .flow[data-name=survey] g.node text')]"
        ".map(t => t.textContent)"
    )
    assert {"gather", "scan", "report"} <= set(labels)
    runs = (await api.get("/v1/flows")).json()["flows"]
    survey = next(run for run in runs if run["name"] == "survey")
    assert {n["name"]: n["state"] for n in survey["nodes"]} == {
        "gather": "completed",
        "scan": "completed",
        "report": "completed",
    }
    assert page.errors == []
