"""Branches on other processes and hosts, on Ray: `Cluster` and `RemoteBranchRef`.

Needs the ``ray`` extra (``pip install 'pride[ray]'``). Importing this package
does not import Ray; connecting a `Cluster` does. ``import pride``
never imports it.

Inside: the caller's side (`pride.cluster.caller`: the Cluster, its refs, one
link per host), the host's side (`pride.cluster.host`: the Ray actor and the
trio Session serving the branches placed on it), and the wire both speak
(`pride.cluster.wire`). The caller creates hosts, so it imports the host's
side; the host never imports the caller's.
"""

from .._public import publish as _publish
from .caller.cluster import DEFAULT_HOST, DEFAULT_STREAM_WINDOW, Cluster, host_cluster
from .caller.ref import RemoteBranchRef
from .caller.supervision import RemoteChild

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_STREAM_WINDOW",
    "Cluster",
    "RemoteBranchRef",
    "RemoteChild",
    "host_cluster",
]

# Tracebacks, reprs and pickles (Ray's too) name the public home of each class and function.
_publish(globals(), __all__, __name__)
