"""Hosts as Ray actors: their names, how they are created, what a placement carries.

A host is a named Ray actor, ``pride-host:<host name>`` in the cluster's
namespace, so any process attached to the namespace finds it by name. This
module is the one place that knows the actor's options: ``max_restarts``
(Ray restarts a dead host), ``max_task_retries=0`` (Ray never runs a
delivery twice), ``lifetime="detached"`` for hosts meant to outlive their
creator, and the runtime environment that lets hosts import the caller's
factories. It also builds placement specs (the factory's import path and
JSON arguments a host records and replays).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .driver import import_ray, wait_ref

if TYPE_CHECKING:
    from ..host.runtime import OpenCluster

__all__ = [
    "HOST_PREFIX",
    "create_host",
    "default_runtime_env",
    "find_host",
    "is_ray_loss",
    "list_hosts",
    "placement",
    "shutdown_host",
]

HOST_PREFIX = "pride-host:"
"""Ray actor names of hosts: ``pride-host:<host name>`` in the cluster's namespace."""

_HOST_CLASS: Any = None


def find_host(namespace: str, host: str) -> Any:
    """The handle of the host actor named ``host``, or None (blocking: call it in a thread)."""
    ray = import_ray()
    try:
        return ray.get_actor(HOST_PREFIX + host, namespace=namespace)
    except ValueError:
        return None


def list_hosts(namespace: str) -> list[str]:
    """The names of the hosts of ``namespace`` (blocking: call it in a thread)."""
    ray = import_ray()
    found = ray.util.list_named_actors(all_namespaces=True)
    return sorted(
        entry["name"].removeprefix(HOST_PREFIX)
        for entry in found
        if entry.get("namespace") == namespace and entry["name"].startswith(HOST_PREFIX)
    )


def create_host(
    host: str,
    *,
    namespace: str,
    storage: Path,
    restarts: int,
    cpus: float,
    detached: bool,
    runtime_env: dict[str, Any] | None,
    resources: dict[str, float] | None,
    session_options: dict[str, Any],
    reconnect_timeout: float,
    open_cluster: OpenCluster | None,
) -> Any:
    """Create the host actor ``host`` (or get it, if another process just did); its handle.

    ``open_cluster`` is how the host opens its own Cluster (``host_cluster``);
    Ray hands the function over by its import path. Blocking: call it in a thread.
    """
    ray = import_ray()
    from ..host.actor import HostActor

    options: dict[str, Any] = {
        "name": HOST_PREFIX + host,
        "namespace": namespace,
        "get_if_exists": True,
        "max_restarts": restarts,
        "max_task_retries": 0,  # a turn is never run twice by Ray
        "num_cpus": cpus,
        "max_concurrency": 1000,
    }
    if detached:
        # Ray destroys an actor once no handle to it is left (named or not): a host
        # meant to outlive this Cluster must not depend on this process's handles.
        options["lifetime"] = "detached"
    if runtime_env:
        options["runtime_env"] = runtime_env
    if resources:
        options["resources"] = resources
    host_options = {
        "session": session_options,
        "namespace": namespace,
        "storage": str(storage),
        "reconnect_timeout": reconnect_timeout,
    }
    return (
        _host_class(ray, HostActor)
        .options(**options)
        .remote(host, str(storage), host_options, open_cluster)
    )


async def shutdown_host(handle: Any) -> None:
    """Stop a host's session (its turns get their grace), then end its process for good."""
    with contextlib.suppress(Exception):
        await wait_ref(handle.shutdown.remote())
    ray = import_ray()
    await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=True))


def is_ray_loss(exc: BaseException) -> bool:
    """True for Ray's errors that mean the actor's process is gone or restarting."""
    ray = import_ray()
    return isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.ActorUnavailableError)


def _host_class(ray: Any, actor: type) -> Any:
    global _HOST_CLASS
    if _HOST_CLASS is None:
        _HOST_CLASS = ray.remote(actor)
    return _HOST_CLASS


def placement(
    factory: Callable[..., Any] | str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
    restart: str,
) -> dict[str, Any]:
    """The placement spec a host builds a branch from."""
    if not isinstance(name, str) or not name:
        raise ValueError("spawn needs a branch name (name=...)")
    return {
        "factory": _factory_path(factory),
        "args": _json_data(list(args), "args"),
        "kwargs": _json_data(kwargs, "kwargs"),
        "name": name,
        "restart": restart,
    }


def _factory_path(factory: Callable[..., Any] | str) -> str:
    if isinstance(factory, str):
        module, sep, attribute = factory.partition(":")
        if not sep or not module or not attribute:
            raise TypeError(f"factory {factory!r} should be 'package.module:callable'")
        return factory
    module_name = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if not callable(factory) or not module_name or not qualname:
        raise TypeError(f"factory must be a function or 'module:function', got {factory!r}")
    if module_name == "__main__" or "<" in qualname:
        raise TypeError(
            f"factory {qualname!r} cannot be imported by the hosts (defined in "
            f"{'__main__' if module_name == '__main__' else 'a function'}): define it at the top "
            "level of a module they can import, or pass 'module:function'"
        )
    return f"{module_name}:{qualname}"


def _json_data(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"spawn {what} must be JSON data (they are replayed on restart): {exc}"
        ) from None


def default_runtime_env() -> dict[str, Any]:
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    cwd = os.getcwd()
    if cwd not in paths:
        paths.insert(0, cwd)
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}
