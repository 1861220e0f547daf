"""Per-project secrets: encrypted at rest, never returned, injected into the jobs that name
them, and redacted from what those jobs print.

Values are sealed with AES-256-GCM under a subkey of the server key; the project and name are
the associated data, so a ciphertext copied to another row does not open. A start that names
secrets gets their values after the placing commit, when the hub sends it
(``SecretKeeper.complete``); the values of each attempt are remembered to redact its logs and
events (and read again from the database after a restart).

A spec's own secret env variables (``JobSpec.secrets``) are kept the same way: sealed into
``jobs.sealed_env`` under a subkey of their own, bound to the job id, with the spec stored
(and parsed, and sent) redacted; they join ``secret_env`` at the same step, so nothing but the
start sent to the node holds them in clear, and they are redacted from the job's reports too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core import redact
from bourse.core.errors import BourseError, InvalidInput, NotFound
from bourse.protocol.access import SecretView
from bourse.protocol.agent import JobEvent, StartJob
from bourse.protocol.common import JobSpec
from bourse.server.commands import Command
from bourse.server.db.schema import Job, Secret
from bourse.server.files.keys import subkey

NONCE_BYTES = 12
MAX_CACHED = 10_000


class SecretBox:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(subkey(key, "secrets"))
        self._env = AESGCM(subkey(key, "job-env"))

    def seal_env(self, job_id: str, values: dict[str, str]) -> bytes:
        """A job's secret env values, bound to the job (its spec holds them redacted)."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._env.encrypt(nonce, json.dumps(values).encode(), job_id.encode())

    def open_env(self, job_id: str, sealed: bytes) -> dict[str, str]:
        try:
            plain = self._env.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:],
                                      job_id.encode())
        except InvalidTag:
            raise BourseError(f"the secret env values of {job_id} cannot be decrypted with "
                              "this server key",
                              hint="restore the data dir's server.key, or submit it again"
                              ) from None
        found: dict[str, str] = json.loads(plain)
        return found

    def seal(self, project_id: str, name: str, value: str) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, value.encode(), _aad(project_id, name))

    def open(self, project_id: str, name: str, sealed: bytes) -> str:
        try:
            plain = self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:],
                                       _aad(project_id, name))
        except InvalidTag:
            raise BourseError(f"secret {name!r} cannot be decrypted with this server key",
                              hint="restore the data dir's server.key, or set it again") from None
        return plain.decode()


def _aad(project_id: str, name: str) -> bytes:
    return f"{project_id}/{name}".encode()


def secret_view(row: Secret) -> SecretView:
    return SecretView(name=row.name, created_at=row.created_at, updated_at=row.updated_at)


async def set_secret(session: AsyncSession, box: SecretBox, project_id: str, name: str, *,
                     value: str, now: float) -> Secret:
    if len(value.encode()) < redact.MIN_BYTES:
        raise InvalidInput(f"a secret must be at least {redact.MIN_BYTES} bytes long",
                           field="value", hint="shorter values cannot be redacted from logs")
    row = await session.get(Secret, (project_id, name), with_for_update=True)
    sealed = box.seal(project_id, name, value)
    if row is None:
        row = Secret(project_id=project_id, name=name, ciphertext=sealed, created_at=now,
                     updated_at=now)
        session.add(row)
    else:
        row.ciphertext, row.updated_at = sealed, now
    return row


async def list_secrets(session: AsyncSession, project_id: str) -> list[Secret]:
    return list((await session.scalars(select(Secret).where(Secret.project_id == project_id)
                                       .order_by(Secret.name))).all())


async def delete_secret(session: AsyncSession, project_id: str, name: str) -> Secret:
    row = await session.get(Secret, (project_id, name))
    if row is None:
        raise NotFound(f"no secret {name!r} in this project", hint="`bourse secrets` lists them")
    await session.delete(row)
    return row


async def check_names(session: AsyncSession, project_id: str, names: Sequence[str]) -> None:
    """A job may name only secrets its project has (checked at submit, again at start)."""
    if not names:
        return
    found = set((await session.scalars(select(Secret.name).where(
        Secret.project_id == project_id, Secret.name.in_(list(names))))).all())
    missing = [n for n in names if n not in found]
    if missing:
        raise InvalidInput(f"no secret {missing[0]!r} in this project", field="project_secrets",
                           hint="set it first with `bourse secrets set NAME`")


async def values(session: AsyncSession, box: SecretBox, project_id: str,
                 names: Sequence[str]) -> dict[str, str]:
    await check_names(session, project_id, names)
    rows = (await session.scalars(select(Secret).where(
        Secret.project_id == project_id, Secret.name.in_(list(names))))).all()
    return {r.name: box.open(project_id, r.name, r.ciphertext) for r in rows}


def seal_spec(box: SecretBox, job_id: str, spec: JobSpec) -> tuple[JobSpec, bytes | None]:
    """The spec to store, its secret env values redacted, and those values sealed."""
    if not spec.secrets:
        return spec, None
    values = {name: spec.env[name] for name in spec.secrets}
    return spec.redacted(), box.seal_env(job_id, values)


def names_secrets(spec: JobSpec) -> bool:
    return bool(spec.project_secrets or spec.secrets)


class SecretKeeper:
    """The hub's side: fills starts with their secrets and redacts what attempts report."""

    def __init__(self, box: SecretBox | None = None) -> None:
        self._box = box  # the server key's, given at start (``open``)
        self._patterns: dict[str, tuple[bytes, ...]] = {}  # job id -> what to redact

    def open(self, box: SecretBox) -> None:
        self._box = box

    @property
    def ready(self) -> bool:
        """Whether the server key is loaded (before that, nothing is sealed or opened)."""
        return self._box is not None

    @property
    def box(self) -> SecretBox:
        assert self._box is not None, "the server key is loaded at start"
        return self._box

    @staticmethod
    def needs(command: Command) -> bool:
        message = command.message
        return isinstance(message, StartJob) and names_secrets(message.spec)

    async def complete(self, session: AsyncSession, command: Command) -> Command:
        """The start with its secrets in ``secret_env`` (project secrets, and the spec's secret
        env values, which its spec holds redacted); InvalidInput if one is gone."""
        message = command.message
        assert isinstance(message, StartJob)
        row = (await session.execute(select(Job.project_id, Job.sealed_env).where(
            Job.id == message.job_id))).one_or_none()
        project, sealed = row if row is not None else ("", None)
        found = await self._values(session, message.job_id, project, sealed,
                                   message.spec.project_secrets)
        self._remember(message.job_id, found.values())
        return Command(command.node_id, message.model_copy(update={"secret_env": found}))

    async def _values(self, session: AsyncSession, job_id: str, project_id: str,
                      sealed: bytes | None, names: Sequence[str]) -> dict[str, str]:
        """The job's secret values by variable: its env's, then its project secrets' (which
        win, as they do in the job's environment)."""
        env = self.box.open_env(job_id, sealed) if sealed is not None else {}
        return {**env, **(await values(session, self.box, project_id, names) if names else {})}

    def note_start(self, message: object) -> None:
        """A start was sent: a job that names no secrets has nothing to redact, so its reports
        need no lookup (a job's spec never changes)."""
        if (isinstance(message, StartJob) and not names_secrets(message.spec)
                and message.job_id not in self._patterns):
            self._remember(message.job_id, ())

    def _remember(self, job_id: str, found: Iterable[str]) -> None:
        if len(self._patterns) > MAX_CACHED:
            self._patterns.clear()
        self._patterns[job_id] = redact.patterns(found)

    async def patterns(self, session: AsyncSession,
                       job_ids: set[str]) -> dict[str, tuple[bytes, ...]]:
        """What to redact from each job's reports: its secrets' values, remembered from its
        start or read again."""
        unknown = {j for j in job_ids if j not in self._patterns}  # not `- keys()`: O(cache)
        if unknown:
            rows = (await session.execute(select(Job.id, Job.project_id, Job.spec,
                                                 Job.sealed_env).where(
                Job.id.in_(list(unknown))))).all()
            for job_id, project_id, spec, sealed in rows:
                found = await self._values(session, job_id, project_id, sealed,
                                           spec.get("project_secrets") or [])
                self._remember(job_id, found.values())
        return {j: self._patterns.get(j, ()) for j in job_ids}

    async def scrub_events(self, session: AsyncSession,
                           events: Sequence[JobEvent]) -> list[JobEvent]:
        found = await self.patterns(session, {e.job_id for e in events})
        return [_scrub_event(e, found[e.job_id]) if found[e.job_id] else e for e in events]


def _scrub_event(event: JobEvent, searched: tuple[bytes, ...]) -> JobEvent:
    return event.model_copy(update={"data": _scrub_value(event.data, searched)})


def _scrub_value(value: object, searched: tuple[bytes, ...]) -> object:
    if isinstance(value, str):
        return redact.redact_text(value, searched)
    if isinstance(value, dict):
        return {k: _scrub_value(v, searched) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_value(v, searched) for v in value]
    return value
