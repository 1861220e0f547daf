"""The agent protocol version, carried by every message (``v``)."""

PROTOCOL_VERSION = 1
