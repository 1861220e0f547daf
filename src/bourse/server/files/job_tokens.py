"""Tokens a job is given for one narrow right (its MLflow run, bursting itself): the job's id
signed with a subkey of the server key of that right's own, so nothing is stored and no kind
passes for another. ``<prefix><job id>_<HMAC-SHA256, base64url>``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass

from bourse.server.files.keys import subkey


@dataclass(frozen=True)
class JobTokens:
    """One kind of job token: its prefix (``bse_r_``) and its subkey's purpose."""

    prefix: str
    purpose: str

    def _mac(self, key: bytes, job_id: str) -> str:
        digest = hmac.new(subkey(key, self.purpose), job_id.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def mint(self, key: bytes, job_id: str) -> str:
        return f"{self.prefix}{job_id}_{self._mac(key, job_id)}"

    def job_of(self, key: bytes, secret: str) -> str | None:
        """The job a well-signed token is for; None for anything else."""
        match = re.fullmatch(re.escape(self.prefix) + r"([A-Za-z0-9-]{1,40})_([A-Za-z0-9_-]{43})",
                             secret)
        if match is None or not hmac.compare_digest(match.group(2),
                                                    self._mac(key, match.group(1))):
            return None
        return match.group(1)
