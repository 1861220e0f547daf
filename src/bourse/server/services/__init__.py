"""Plain service functions: ``async def verb_noun(session, ...)``; no network calls inside."""
