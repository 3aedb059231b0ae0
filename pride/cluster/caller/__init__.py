"""The caller's side of a cluster: `Cluster`, `RemoteBranchRef`, and one link per host.

`pride.cluster.caller.cluster` is the [`Cluster`][pride.cluster.Cluster], which
places branches (`pride.cluster.caller.hosts` creates the host actors it
needs, from `pride.cluster.host`) and keeps one connection per host
(`pride.cluster.caller.link`): envelopes out in numbered batches, answers
back read as hostile input (`pride.cluster.caller.answers`). Refs are
targets for the send API (`pride.cluster.caller.ref`); remote children of a
local Session are `pride.cluster.caller.supervision`'s.
"""
