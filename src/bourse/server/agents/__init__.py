"""The coordinator's side of the agents: their connections (``connections``, over the channel
seam: ``socket``), what they report (``intake``), what they are told (``dispatch``), and the
hub that runs each connection (``hub``). See ARCHITECTURE.md for the main path."""
