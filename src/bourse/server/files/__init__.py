"""What the coordinator keeps on disk: its data dir kept private (``datadir``), the server key
(``keys``), code bundles in the store or on disk (``bundles``)."""
