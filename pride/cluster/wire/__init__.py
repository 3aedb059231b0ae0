"""What a caller and a host agree on: the JSON on the wire and where hosts keep their files.

Both sides import this package and nothing of each other's through it:
`pride.cluster.wire.encoding` is what crosses between them (plain JSON,
never pickles), `pride.cluster.wire.storage` the private directories a host
replays from. Nothing here imports Ray.
"""
