"""Identifiers and secrets."""

from __future__ import annotations

import hashlib
import secrets


def new_id(prefix: str) -> str:
    """``j-3f9c2a1b7d4e``: a prefix and 12 random hex digits."""
    return f"{prefix}-{secrets.token_hex(6)}"


def new_secret(kind: str) -> str:
    """A bearer token: ``bse_<kind>_`` and 32 random bytes, URL-safe."""
    return f"bse_{kind}_{secrets.token_urlsafe(32)}"


def digest(secret: str) -> str:
    """What is stored instead of a token. Tokens carry 256 random bits, so a fast hash is
    enough: there is nothing to brute-force."""
    return hashlib.sha256(secret.encode()).hexdigest()
