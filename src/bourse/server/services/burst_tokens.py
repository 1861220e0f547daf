"""The burst token a job is given (``BOURSE_BURST_TOKEN``): the right to move itself.

A job's ``BourseElastic`` asks the coordinator to burst its own job. It needs an address
(``BOURSE_URL``, given to every job) and a credential; a user's token in a project secret
would do, but would let the job do anything its owner can. This token does one thing: it is
accepted by ``POST /api/v1/jobs/{id}/burst`` for its own job only, while the job has not ended.
It is ``bse_b_<job id>_<HMAC>`` under the server key's ``burst`` subkey (as the tracking token,
``services.tracking_tokens``, under its own subkey, so neither token passes for the other):
nothing is stored. It travels in the start's ``secret_env``, so the agent never writes it to
the spool and masks it in the job's logs.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import Forbidden, Unauthorized
from bourse.core.states import JobState
from bourse.protocol.agent import StartJob
from bourse.server.db.schema import Job
from bourse.server.files.job_tokens import JobTokens
from bourse.server.services.tokens import Principal

PREFIX = "bse_b_"
TOKENS = JobTokens(PREFIX, "burst")
TOKEN_ENV, URL_ENV = "BOURSE_BURST_TOKEN", "BOURSE_URL"


def mint(key: bytes, job_id: str) -> str:
    return TOKENS.mint(key, job_id)


def job_of(key: bytes, secret: str) -> str | None:
    """The job a well-signed token is for; None for anything else."""
    return TOKENS.job_of(key, secret)


async def burster(session: AsyncSession, key: bytes, secret: str, job_id: str) -> Principal:
    """The principal a burst token acts as, for a burst of ``job_id``; refused when the token
    is forged, for another job, or its job has ended."""
    own = job_of(key, secret)
    job = await session.get(Job, own) if own else None
    if job is None:
        raise Unauthorized("not a valid burst token")
    if own != job_id:
        raise Forbidden(f"a job's burst token moves only its own job ({own}), not {job_id}",
                        hint="burst another job with a user token")
    if JobState(job.state).terminal:
        raise Unauthorized(f"job {job.id} has ended; its burst token ended with it")
    return Principal(kind="user", token_id=f"job:{job.id}", project_id=job.project_id)


def with_burst(message: StartJob, key: bytes, url: str) -> StartJob:
    """The start with the coordinator's address (unless the job names one) and its token."""
    named = URL_ENV in message.spec.env or URL_ENV in message.secret_env
    env = message.env if named else {**message.env, URL_ENV: url}
    secret = {**message.secret_env, TOKEN_ENV: mint(key, message.job_id)}
    return message.model_copy(update={"env": env, "secret_env": secret})
