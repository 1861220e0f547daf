"""The name of the browser session's cookie (``ui/session.py``), in a module of its own: the
port proxy strips it from what it forwards to jobs, and must not import the UI to know it."""

COOKIE = "bourse_session"
