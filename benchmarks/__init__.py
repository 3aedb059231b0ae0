"""pride's benchmarks: ``python -m benchmarks`` (``make bench``), ``--smoke`` for a tiny run."""
