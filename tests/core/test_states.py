"""The shared groups of states: what each says of every state, and that the enums' properties
and the sets agree (the server, the SDK, the CLI and the UI use either)."""

from __future__ import annotations

import pytest

from bourse.core.states import (
    ATTEMPT_ACTIVE,
    ATTEMPT_INTERRUPTED,
    ATTEMPT_TERMINAL,
    ATTEMPT_UNSUCCESSFUL,
    JOB_ACTIVE,
    JOB_LIVE,
    JOB_TERMINAL,
    JOB_WAITING,
    AttemptState,
    JobState,
)

# state -> (waiting, active, terminal)
JOBS = {
    "PENDING": (True, False, False),
    "SCHEDULED": (True, True, False),
    "STARTING": (True, True, False),
    "RUNNING": (False, True, False),
    "SUCCEEDED": (False, False, True),
    "FAILED": (False, False, True),
    "CANCELLED": (False, False, True),
}

# state -> (active, terminal, interrupted, unsuccessful)
ATTEMPTS = {
    "SCHEDULED": (True, False, False, False),
    "STARTING": (True, False, False, False),
    "RUNNING": (True, False, False, False),
    "SUCCEEDED": (False, True, False, False),
    "FAILED": (False, True, False, True),
    "CANCELLED": (False, True, False, True),
    "LOST": (False, True, True, True),
    "PREEMPTED": (False, True, True, True),
}


def test_the_tables_name_every_state() -> None:
    assert set(JOBS) == {s.value for s in JobState}
    assert set(ATTEMPTS) == {s.value for s in AttemptState}


@pytest.mark.parametrize(("value", "expected"), JOBS.items())
def test_job_groups(value: str, expected: tuple[bool, bool, bool]) -> None:
    state = JobState(value)
    assert (state in JOB_WAITING, state in JOB_ACTIVE, state in JOB_TERMINAL) == expected
    assert (state.waiting, state.active, state.terminal) == expected
    assert (state in JOB_LIVE) is not state.terminal


@pytest.mark.parametrize(("value", "expected"), ATTEMPTS.items())
def test_attempt_groups(value: str, expected: tuple[bool, bool, bool, bool]) -> None:
    state = AttemptState(value)
    assert (state in ATTEMPT_ACTIVE, state in ATTEMPT_TERMINAL, state in ATTEMPT_INTERRUPTED,
            state in ATTEMPT_UNSUCCESSFUL) == expected
    assert (state.active, state.terminal, state.interrupted) == expected[:3]


def test_a_wire_string_is_found_in_a_set_of_members() -> None:
    """The API's JSON and the database hold the values: a StrEnum equals and hashes as its
    value, so a plain string is looked up in the sets as its member is."""
    assert "PENDING" in JOB_WAITING and "SUCCEEDED" in JOB_TERMINAL
    assert "LOST" in ATTEMPT_INTERRUPTED and "RUNNING" not in JOB_TERMINAL
