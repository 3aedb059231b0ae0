"""A small support team behind ``pride serve --console``, and what the console reads.

``pride serve examples/console.py:build --console``, then open the link it
prints (``http://127.0.0.1:PORT/?token=...``) in a browser: the tree, each
turn as it runs and what it cost, the conversations, a refund waiting for
approval with Approve and Deny buttons, and the waterfall of recent turns,
where ``triage``'s call to its ``ask_billing`` tool holds ``billing``'s turn,
and the graph of the ``review`` flow its ``review_case`` tool runs.

``python examples/console.py`` does, with httpx, what the browser does: it
starts the server with ``--console``, signs in with the token once (the
answer is a redirect and an HttpOnly cookie), reads the tree and the
waterfall with that cookie alone, approves the waiting refund as the page's
Approve button does (a POST with the page's Origin), then drains the server.
Every agent is on the scripted model: no API key.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from pride import Branch, ChatAndRecord, Flow, ScriptedModel, Session, tool
from pride.llm import ModelRequest, ScriptedReply, ToolCall, Usage

ANNOUNCE = "pride serve: serving on "


def _reply(text: str = "", *calls: ToolCall) -> ScriptedReply:
    # A cost per call, as a priced provider reports it, so the console has costs to show.
    return ScriptedReply(text, calls, Usage(input_tokens=120, output_tokens=30, cost_usd=0.0021))


def triage_model(request: ModelRequest) -> ScriptedReply:
    """Triage: asks billing about invoices, offers a refund for a double charge."""
    last = request.messages[-1]
    if last.get("role") == "tool":
        return _reply(f"**Done.** {last.get('content')}")
    text = str(last.get("content"))
    if "review" in text:
        return _reply("", ToolCall(name="review_case", arguments={"case": "C-7"}))
    if "charged twice" in text:
        return _reply("", ToolCall(name="refund", arguments={"order": "A-1042", "amount": 19.0}))
    return _reply("", ToolCall(name="ask_billing", arguments={"question": text}))


def billing_model(request: ModelRequest) -> ScriptedReply:
    """Billing: answers about invoices, with a little markdown."""
    return _reply("Invoice `INV-7` is **paid**:\n\n- amount: 19.00\n- paid on: 2 May")


def policy_model(request: ModelRequest) -> ScriptedReply:
    """Policy: says what the rules allow."""
    return _reply("A double charge is refunded in full.")


@tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {amount:.2f} on {order}"


async def build(session: Session) -> None:
    """The tree ``pride serve`` serves: ``triage`` at the front, ``billing`` and
    ``policy`` in ``back-office``."""
    back_office = await session.spawn_session("back-office")
    await back_office.spawn(
        Branch(
            name="billing",
            system="You answer billing questions.",
            chat_model=ScriptedModel(billing_model),
        )
    )
    await back_office.spawn(
        Branch(
            name="policy",
            system="You know the refund rules.",
            chat_model=ScriptedModel(policy_model),
        )
    )

    @tool
    async def ask_billing(question: str) -> str:
        """Ask the billing agent."""
        answer: str = await session.ask("billing", ChatAndRecord(instruction=question))
        return answer

    @tool
    async def review_case(case: str) -> str:
        """Review a case as a flow: the invoice and the rules at once, then a decision."""
        flow = Flow("review")
        flow.add("billing", ChatAndRecord(instruction=f"The invoice of {case}?"), name="invoice")
        flow.add("policy", ChatAndRecord(instruction="The rule for a double charge?"), name="rules")
        flow.add(
            "policy",
            lambda up: ChatAndRecord(instruction=f"Decide: {up['invoice']} {up['rules']}"),
            depends_on=["invoice", "rules"],
            name="decision",
        )
        result = await session.flow(flow)
        return str(result["decision"])

    await session.spawn(
        Branch(
            name="triage",
            system="You sort support requests.",
            chat_model=ScriptedModel(triage_model),
            tools=[ask_billing, refund, review_case],
        )
    )


def _rows(span: dict[str, Any], depth: int = 0) -> list[str]:
    label = span["branch"] if span["kind"] == "turn" else span["name"]
    rows = [f"{'  ' * depth}{span['kind']:<5} {label:<12} {span['duration_ms']:8.1f} ms"]
    for child in span["children"]:
        rows.extend(_rows(child, depth + 1))
    return rows


def use(url: str, token: str) -> None:
    """What the console's page does, with httpx."""
    operate = {"type": "Operate", "actions": True}
    with httpx.Client(base_url=url, timeout=30) as program:  # a program: the bearer token
        program.headers["Authorization"] = f"Bearer {token}"
        for question in ("Is invoice INV-7 paid?", "Please review case C-7"):
            program.post(
                "/v1/branches/triage/ask",
                json={"command": {**operate, "instruction": question}},
            )
        waiting = program.post(
            "/v1/branches/triage/ask",
            json={"command": {**operate, "instruction": "I was charged twice"}},
        )
        print(f"a refund waits for a person: {waiting.json()['error']['type']}")
    with httpx.Client(base_url=url, timeout=30) as browser:  # a browser: the cookie
        signed_in = browser.get("/", params={"token": token})
        attributes = signed_in.headers["set-cookie"].split("; ")[1:]
        where = signed_in.headers["location"]
        print(f"signing in: {signed_in.status_code} to {where}, a cookie {'; '.join(attributes)}")
        page = browser.get("/")
        print(f"the page: {page.status_code}, {len(page.content)} bytes")
        tree = browser.get("/v1/branches").json()["session"]
        for session in (tree, *tree["sessions"]):
            for branch in session["branches"]:
                cost = branch["usage"]["cost_usd"]
                where = f"{session['name']} / {branch['name']}"
                print(f"{where:<22} {branch['state']}, cost so far ${cost:.4f}")
        (review,) = browser.get("/v1/flows").json()["flows"]
        nodes = ", ".join(f"{n['name']} {n['state']}" for n in review["nodes"])
        print(f"the flow {review['name']!r}: {nodes}")
        (first, *_) = reversed(browser.get("/v1/traces").json()["traces"])
        print("the first turn's waterfall:")
        print("\n".join(_rows(first)))
        (approval,) = browser.get("/v1/approvals").json()["approvals"]
        call = approval["pending"][0]
        decided = browser.post(
            f"/v1/turns/{approval['turn_id']}/resolve",
            json={"decisions": {call["call_id"]: {"type": "Approve"}}},
            headers={"Origin": url},  # what the page's fetch sends; without it: 403
        )
        output = decided.json()["result"]["output"]
        print(f"approved {call['function']}({call['arguments']}): {output}")


def main() -> int:
    token = secrets.token_urlsafe(24)
    command = [sys.executable, "-m", "pride.cli", "serve", f"{Path(__file__)}:build"]
    server = subprocess.Popen(
        [*command, "--console", "--port", "0", "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PRIDE_SERVE_TOKEN": token},
    )
    assert server.stdout is not None
    try:
        line = server.stdout.readline()
        if not line.startswith(ANNOUNCE):
            print(f"the server did not start: {line!r}", file=sys.stderr)
            return 1
        url = line.removeprefix(ANNOUNCE).strip()
        use(url, token)
        print(f"open {url}/?token=... in a browser to see all this live")
    finally:
        server.send_signal(signal.SIGTERM)
        status = server.wait(timeout=30)
    print(f"the server drained and exited {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
