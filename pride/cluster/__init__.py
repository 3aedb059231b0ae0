"""Branches on other processes and hosts, on Ray: `Cluster` and `RemoteBranchRef`.

Needs the ``ray`` extra (``pip install 'pride[ray]'``). Importing this package
does not import Ray; connecting a `Cluster` does. ``import pride``
never imports it.
"""

from .._public import publish as _publish
from ._supervision import RemoteChild
from .cluster import DEFAULT_HOST, DEFAULT_STREAM_WINDOW, Cluster, RemoteBranchRef, host_cluster

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
