"""What ``bourse exec`` runs in: saved next to an attempt before its process starts, read by
the agent when an exec arrives, dropped when the process ends (it may hold store keys)."""

from __future__ import annotations

import stat
from pathlib import Path

from bourse.agent.execs import BESIDE, drop_beside, load_beside, save_beside
from bourse.agent.shim import AttemptDir


def test_saved_in_place_readable_by_the_agent_only_and_read_back(tmp_path: Path) -> None:
    adir = AttemptDir(tmp_path / "jobs" / "j1" / "1")
    adir.create()
    save_beside(adir, adir.work, {"AWS_SECRET_ACCESS_KEY": "k", "A": "1"}, image=None, uid=1234)
    assert sorted(p.name for p in adir.root.iterdir()) == [BESIDE, "logs", "tmp", "work"]
    assert stat.S_IMODE((adir.root / BESIDE).stat().st_mode) == 0o600
    beside = load_beside(adir)
    assert beside is not None
    assert (beside.cwd, beside.env, beside.image, beside.uid) == (
        adir.work, {"AWS_SECRET_ACCESS_KEY": "k", "A": "1"}, None, 1234)


def test_a_file_cut_short_reads_as_none_and_dropping_removes_it(tmp_path: Path) -> None:
    adir = AttemptDir(tmp_path / "jobs" / "j1" / "1")
    adir.create()
    save_beside(adir, adir.work, {"A": "1"})
    full = (adir.root / BESIDE).read_text()
    (adir.root / BESIDE).write_text(full[: len(full) // 2])  # the agent died mid-write
    assert load_beside(adir) is None
    (adir.root / BESIDE).with_suffix(".tmp").write_text(full)  # an older agent's leftover
    drop_beside(adir)
    assert not (adir.root / BESIDE).exists()
    assert not (adir.root / BESIDE).with_suffix(".tmp").exists()
    assert load_beside(adir) is None
