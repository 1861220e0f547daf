"""Streams to jobs' ports and exec sessions over agent connections (``tunnels``), and
HTTP/WebSocket spoken over them (``proxy``)."""
