"""The audit trail's shell: the ASGI middleware that records each request (``middleware``), the
group-committed writer (``writer``) and the sealed head outside the database (``seal``); the
chain itself is ``services.audit``."""
