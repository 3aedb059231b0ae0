"""What ``pride run`` takes from the optional extras: ``--otel`` and ``--cluster``.

Each is imported on first use only, so ``pride run`` without them never loads
OpenTelemetry or Ray: ``--otel`` exports the turns' spans over OTLP
(`pride.telemetry`), ``--cluster`` places branches on Ray hosts
(`pride.cluster`) beside the process's own supervisor tree.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..supervisors import Session

__all__ = ["placement", "start_tracing", "stop_tracing"]

log = logging.getLogger("pride.cli")


def start_tracing() -> Any:
    """``--otel``: an OTLP exporting provider, and pride's turns traced into it.

    Raises:
        ImportError: the otel extra or the OTLP exporter is not installed.
        ValueError: an unknown ``OTEL_EXPORTER_OTLP_PROTOCOL``.
    """
    try:
        from .. import telemetry
    except ImportError as exc:
        raise ImportError(f"--otel: {exc}") from exc
    provider = telemetry.otlp_provider()
    telemetry.instrument(provider)
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318 (the default)"
    )
    log.info("tracing: spans are exported over OTLP to %s", endpoint)
    return provider


def stop_tracing(provider: Any) -> None:
    """Export what is still queued (bounded by the SDK's own timeout), then stop."""
    from .. import telemetry

    telemetry.uninstrument()
    try:
        provider.shutdown()
    except Exception:
        log.exception("tracing: exporting the last spans failed")


@contextlib.asynccontextmanager
async def placement(
    cluster: str | None, store: Path | None, session: Session
) -> AsyncIterator[Any]:
    """The cluster ``--cluster`` asks for (``cluster``: a Ray address or ``"local"``;
    its remote signals reach ``session``), or None.

    It outlives the session: the session stops first, then the hosts this
    process created.
    """
    if cluster is None:
        yield None
        return
    from ..cluster import Cluster

    address = None if cluster == "local" else cluster
    log.info("placing branches on %s", address or "a local Ray cluster")
    if store is not None:
        # The hosts' stores live beside the process's own, so a restart of
        # `pride run --store X --cluster` finds both again.
        storage = store.parent / f"{store.name}.hosts"
        async with Cluster(
            address=address, namespace="pride-run", session=session, storage=storage
        ) as placed:
            yield placed
        return
    # No --store: nothing is durable, as without --cluster. A directory of this
    # run's own keeps hosts from reading files another run (or another pride
    # version) left in a shared place.
    with tempfile.TemporaryDirectory(prefix="pride-run-hosts-") as storage_dir:
        async with Cluster(
            address=address, namespace="pride-run", session=session, storage=storage_dir
        ) as placed:
            yield placed
