"""The host side of a cluster: a Ray actor process serving the branches placed on it.

`pride.cluster.host.actor` is the Ray glue (asyncio: it parses, journals and
hands over), `pride.cluster.host.runtime` the trio side (the host's durable
Session), `pride.cluster.host.serving` how it serves its callers'
connections (order, backpressure, cancellation, streams, signals), and
`pride.cluster.host.outbox` how it answers them. It builds on the wire
(`pride.cluster.wire`) and knows nothing of the caller's side: the Cluster a
host's branches use to reach other hosts is handed to it when it is created.
"""
