"""Without ``--console``, ``/`` is what it always was: a path the API does not have."""

from __future__ import annotations

import httpx

from tests.serve.conftest import TOKEN, Served


async def test_without_the_console_root_is_not_served(served: Served) -> None:
    """``/`` is 401 without a token and 404 with one; ``?token=`` signs nothing in;
    the console's files are not there."""
    async with httpx.AsyncClient(base_url=served.url) as client:
        assert (await client.get("/")).status_code == 401
        link = await client.get("/", params={"token": TOKEN})
        assert link.status_code == 401
        assert "set-cookie" not in link.headers
        found = await client.get("/", headers=served.headers())
        assert found.status_code == 404
        assert found.json()["error"]["type"] == "NotFound"
        script = await client.get("/console/console.js", headers=served.headers())
        assert script.status_code == 404
