"""The tracking token a job is given (``MLFLOW_TRACKING_TOKEN``), and the variables that
point MLflow inside a job at the exchange.

The token is ``bse_r_<job id>_<HMAC>`` under the server key's ``tracking`` subkey: nothing
is stored, and it is good while its job has not ended. It is accepted by the tracking routes
only (the MLflow API and the artifact proxy), in the job's project, and writes one run: the
job's own (``Writer.run_id``); it reads the project's experiments and runs, as a member's
token does. It travels in the start's ``secret_env``, so the agent never writes it to the
spool and masks it in the job's logs.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import Unauthorized
from bourse.core.states import JobState
from bourse.protocol.agent import StartJob
from bourse.server.access import Scope
from bourse.server.db.schema import Job
from bourse.server.files.job_tokens import JobTokens
from bourse.server.services.tracking import Writer

PREFIX = "bse_r_"
TOKENS = JobTokens(PREFIX, "tracking")
RUN_ID_ENV, TOKEN_ENV, URI_ENV = "MLFLOW_RUN_ID", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_URI"


def mint(key: bytes, job_id: str) -> str:
    return TOKENS.mint(key, job_id)


def job_of(key: bytes, secret: str) -> str | None:
    """The job a well-signed token is for; None for anything else."""
    return TOKENS.job_of(key, secret)


async def run_writer(session: AsyncSession, key: bytes, secret: str) -> Writer:
    job_id = job_of(key, secret)
    job = await session.get(Job, job_id) if job_id else None
    if job is None:
        raise Unauthorized("not a valid tracking token")
    if JobState(job.state).terminal:
        raise Unauthorized(f"job {job.id} has ended; its tracking token ended with it",
                           hint="read its run with a user token")
    return Writer(job.project_id, Scope(job.project_id), job.id)


def with_tracking(message: StartJob, key: bytes, url: str) -> StartJob:
    """The start with MLflow's variables, unless the job's spec points MLflow elsewhere."""
    if URI_ENV in message.spec.env:
        return message
    env = {**message.env, RUN_ID_ENV: message.job_id, URI_ENV: url}
    secret = {**message.secret_env, TOKEN_ENV: mint(key, message.job_id)}
    return message.model_copy(update={"env": env, "secret_env": secret})
