"""The agent's process runtime: runs attempts as local processes and reports them via the spool.

``start`` records the attempt and spools ``accepted``, prepares its directory (extracts the
code bundle, finds the workdir), runs the ``prepare`` hook (:mod:`bourse.agent.hooks`; the data
plane prefetches inputs there), spawns the command under the shim (:mod:`bourse.agent.shim`)
with a minimal environment — never the agent's own, which holds credentials — plus what the
hook returned, as the attempt's own user when the agent is root (:mod:`bourse.agent.isolation`
sets the directory up, hands it over, and wipes it at the end), and spools ``started``. A
failure before the process runs spools ``start_failed``. Then one asyncio task per attempt
polls every ``poll_interval`` (:mod:`bourse.agent.watch`): it tails the logs into the spool
(:mod:`bourse.agent.tailer`), SIGKILLs a cancelled job whose grace has run out, and notices the
exit; it then drains the logs to their end, runs the ``finish`` hook (the data plane uploads
outputs there) and spools ``exited`` with what it returned. Every decision is recorded in the
spool first, so a new Runtime over the same spool and work dir can ``adopt`` the jobs of one
that was killed (and finish them).

How the daemon drives it (all on its event loop thread; the spool is single-threaded):

1. open the :class:`~bourse.agent.spool.Spool`, build the Runtime, ``await adopt()`` before any
   command is handled;
2. per connection: ``hello`` and heartbeats carry ``running()``; a sender loop sends
   ``spool.pending(after_id)`` rows in order (envelope id ``str(row.id)``, type ``row.type``,
   body ``row.body()``) from ``after_id = 0``, awaiting ``spool.changed`` when none are new; the
   coordinator's ``ack`` ids go to ``spool.ack``;
3. ``start_job`` -> ``await start(msg, bundle_path)`` (the bundle fetched beforehand),
   ``cancel_job`` -> ``await cancel(...)``; both are idempotent;
4. on shutdown ``await close()`` (jobs keep running), then ``spool.close()``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from bourse.agent import gang, shim, tensorboard
from bourse.agent import watch as watching
from bourse.agent.attempt import StartError, base_env, exit_info, job_env, prepare
from bourse.agent.execs import drop_beside, save_beside
from bourse.agent.fence import FENCED_REASON, Lease
from bourse.agent.hooks import AttemptHooks, Emit
from bourse.agent.isolation import Isolation
from bourse.agent.listeners import taken_port
from bourse.agent.shim import AttemptDir
from bourse.agent.spool import AttemptRecord, AttemptStatus, Spool
from bourse.agent.tailer import LogTailer
from bourse.agent.track import TRACK_FILE_ENV, TrackTailer, track_file
from bourse.agent.watch import Ended, Key, Watch
from bourse.core import redact
from bourse.core.errors import BourseError
from bourse.core.ratelimit import LogLimit
from bourse.protocol.agent import LOG_CHUNK_BYTES, RETRY_ELSEWHERE, StartJob
from bourse.protocol.common import AttemptRef

T = TypeVar("T")
log = logging.getLogger(__name__)



class Runtime:
    def __init__(self, work_dir: Path, spool: Spool, *, poll_interval: float = 0.05,
                 chunk_bytes: int = LOG_CHUNK_BYTES,
                 max_pending_log_bytes: int = 16 * 1024 * 1024,
                 environ: Mapping[str, str] | None = None,
                 hooks: AttemptHooks | None = None,
                 isolation: Isolation | None = None, log_limit: LogLimit | None = None,
                 lease: Lease | None = None) -> None:
        """``environ``: where PATH, HOME and LANG for jobs come from (default: the agent's).
        ``hooks``: work before the process starts and after it ended (`bourse.agent.hooks`).
        ``isolation``: who jobs run as and what is wiped after them (default: nothing,
        jobs run as the agent's user; `bourse.agent.isolation`).
        ``log_limit``: each job's log rate limit (`bourse.core.ratelimit`).
        ``lease``: the node's lease, which attempts fence themselves by (`bourse.agent.fence`);
        None: they never do."""
        self._lease = lease
        self._log_limit = log_limit or LogLimit()
        self._hooks = hooks or AttemptHooks()
        self._isolation = isolation or Isolation()
        self._preparing: dict[Key, asyncio.Future[Any]] = {}  # a cancel cancels them
        self._work_dir = work_dir
        self._spool = spool
        self._poll = poll_interval
        self._chunk = chunk_bytes
        self._max_pending = max_pending_log_bytes
        self._base_env = base_env(os.environ if environ is None else environ)
        self._watches: dict[Key, Watch] = {}
        self._starting: set[Key] = set()
        self._unswept: set[Key] = set()  # ended, wiped but for logs not yet acknowledged

    # --- commands ----------------------------------------------------------------------------

    async def start(self, msg: StartJob, bundle: Path | None = None) -> None:
        """Start an attempt; a start for an attempt already known does nothing."""
        key = (msg.job_id, msg.attempt)
        if self._spool.get_attempt(*key) is not None:
            return
        record = self._new_record(msg)
        adir = AttemptDir(Path(record.dir))
        with self._spool.atomic():
            self._spool.put_attempt(record)
            self._spool.append_event(*key, "accepted", {}, time.time())
        self._starting.add(key)
        try:
            await self._launch(key, adir, msg, bundle)
        finally:
            self._starting.discard(key)

    def reject(self, msg: StartJob, reason: str) -> None:
        """Refuse a start before anything runs (say, its bundle could not be fetched): records
        the attempt and spools ``start_failed``. Does nothing for an attempt already known."""
        key = (msg.job_id, msg.attempt)
        if self._spool.get_attempt(*key) is not None:
            return
        with self._spool.atomic():
            self._spool.put_attempt(self._new_record(msg))
            self._fail_start(key, reason)

    async def cancel(self, job_id: str, attempt: int, grace_s: float = 10.0,
                     reason: str = "cancelled", stale: bool = False) -> None:
        """SIGTERM the attempt's process group, SIGKILL it after ``grace_s``; its ``exited``
        event will carry ``reason``. ``stale``: the coordinator gave the attempt up, so it is
        killed and nothing more about it is spooled (unsent rows included) — unless its
        process has already ended: then there is nothing to kill, and its exit, spooled,
        still goes out (the coordinator takes the success of an attempt it gave up)."""
        record = self._spool.get_attempt(job_id, attempt)
        if record is None or not record.state.active:
            return
        kill_at = time.time() + grace_s
        with self._spool.atomic():
            if stale:
                self._spool.drop_pending(job_id, attempt)
                self._spool.update_attempt(job_id, attempt, state=AttemptStatus.STALE,
                                           kill_at=kill_at)
            else:
                self._spool.update_attempt(job_id, attempt, cancel_reason=reason,
                                           kill_at=kill_at)
        preparing = self._preparing.get((job_id, attempt))
        if preparing is not None:
            preparing.cancel()
        watch = self._watches.get((job_id, attempt))
        if watch is not None:
            watch.stale = watch.stale or stale
            watch.kill_at = kill_at
            watching.send(watch, signal.SIGTERM)
            watching.escalate(watch)

    def live(self) -> list[tuple[str, int, int, Path, bool, tuple[str, ...] | None]]:
        """(job id, attempt, pid, directory, whether it runs in a container, the devices it
        was given) of each attempt whose process is watched."""
        found = []
        for w in self._watches.values():
            record = self._spool.get_attempt(*w.key)
            if not w.stale and record is not None:
                msg = w.start_message(record)
                gpus = None if msg.gpus is None else tuple(msg.gpus)
                found.append((*w.key, w.pid, w.adir.root, msg.spec.compute.image is not None,
                              gpus))
        return found

    def running(self) -> list[AttemptRef]:
        """Attempts that are active or whose final event is not yet acknowledged."""
        return self._spool.reportable()

    async def adopt(self) -> None:
        """After an agent restart: watch again every recorded attempt whose process may still
        be running, and report the exits of those that ended meanwhile."""
        active = (AttemptStatus.STARTING, AttemptStatus.RUNNING, AttemptStatus.STALE)
        for record in self._spool.attempts(*active):
            key = (record.job_id, record.attempt)
            if key not in self._watches and key not in self._starting:
                self._adopt(record)
        if self._isolation.wipes:
            ended = self._spool.attempts(AttemptStatus.EXITED, AttemptStatus.START_FAILED)
            self._unswept |= {(r.job_id, r.attempt) for r in ended if Path(r.dir).exists()}
            self.sweep()

    def sweep(self) -> None:
        """Remove what is left of ended attempts (their logs) once the coordinator has
        acknowledged all of it; the daemon calls it on every ``ack``."""
        for key in list(self._unswept):
            record = self._spool.get_attempt(*key)
            done = record is None or record.final_acked or record.state is AttemptStatus.STALE
            if done and self._spool.pending_log_bytes(*key) == 0:
                if record is not None:
                    self._isolation.forget(Path(record.dir))
                self._unswept.discard(key)

    async def close(self) -> None:
        """Stop watching, leaving the jobs running (a later Runtime can adopt them)."""
        tasks = [w.task for w in self._watches.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watches.clear()

    def _new_record(self, msg: StartJob) -> AttemptRecord:
        adir = AttemptDir.of(self._work_dir, msg.job_id, msg.attempt)
        return AttemptRecord(job_id=msg.job_id, attempt=msg.attempt,
                             spec=msg.model_dump_json(exclude={"secret_env"}),  # not on disk
                             dir=str(adir.root), state=AttemptStatus.STARTING,
                             created=time.time())

    def _adopt(self, record: AttemptRecord) -> None:
        if record.state is AttemptStatus.STARTING:
            record = self._recover_starting(record)
        if record.pid is None:
            return
        if record.state is AttemptStatus.STALE and not shim.is_alive(record.pid,
                                                                     record.proc_start):
            return
        self._watch(record)

    # --- starting ----------------------------------------------------------------------------

    async def _launch(self, key: Key, adir: AttemptDir, msg: StartJob,
                      bundle: Path | None) -> None:
        meeting = await self._host(key, msg)
        if isinstance(meeting, str):
            self._fail_start(key, meeting)
            return
        try:
            await self._launch_prepared(key, adir, msg, bundle, meeting)
        finally:
            if meeting is not None:
                meeting.close()

    async def _host(self, key: Key, msg: StartJob) -> gang.Meeting | str | None:
        """Rank 0 of a gang: its port, held and said (``rendezvous``) before it prepares."""
        if msg.gang is None or msg.gang.rank:
            return None
        return await gang.host(msg.gang, self._emitter(key))

    async def _launch_prepared(self, key: Key, adir: AttemptDir, msg: StartJob,
                               bundle: Path | None, meeting: gang.Meeting | None) -> None:
        cwd = self._went_on(key, await self._prepare(adir, msg, bundle))
        if cwd is None:
            return
        data = self._went_on(key, await self._prepare_data(key, adir, msg))
        if data is None:
            return
        met = self._went_on(key, await self._meet(key, msg, meeting))
        if met is None:
            return
        taken = taken_port(msg)
        if taken is not None:
            self._fail_start(key, taken, elsewhere=True)
            return
        self._spawn(key, adir, msg, cwd, {**data, **met})

    def _went_on(self, key: Key, step: T | str) -> T | None:
        """A preparation step's result; None when the start stops there (given up or
        cancelled meanwhile, or the step failed: then the start fails, saying why)."""
        if not self._goes_on(key):
            return None
        if isinstance(step, str):
            self._fail_start(key, step)
            return None
        return step

    def _spawn(self, key: Key, adir: AttemptDir, msg: StartJob, cwd: Path,
               data: dict[str, str]) -> None:
        """``data``: the variables of its data plan and of its gang."""
        try:
            user = self._isolation.hand_over(adir)
            base = self._base_env | (user.env(adir.tmp) if user else {})
            if msg.gang is not None:
                base = gang.without_leaks(base)
            data = {**data, TRACK_FILE_ENV: str(track_file(adir))}
            argv, env = self._hooks.command(msg, adir, cwd, job_env(base, adir.tmp, msg, data))
            if user is not None and msg.spec.compute.image is None:
                argv = user.wrap(argv)  # a container's user is the engine's --user
            save_beside(adir, cwd, env, msg.spec.compute.image,  # what `bourse exec` runs in
                        user.uid if user else None)
            pid = shim.spawn(adir, cwd, argv, env,
                             fence=self._lease.shim_args() if self._lease else shim.NO_FENCE)
        except StartError as e:
            self._fail_start(key, e.message + (f" ({e.hint})" if e.hint else ""))
            return
        except (OSError, ValueError) as e:
            drop_beside(adir)
            self._fail_start(key, f"cannot start the job's process: {e}")
            return
        self._watch(self._record_started(key, pid, shim.start_time(pid)), msg)

    def _goes_on(self, key: Key) -> bool:
        """Whether a start goes on: not given up (stale) meanwhile — its leftovers are
        released —, nor cancelled — its exit is reported."""
        record = self._spool.get_attempt(*key)
        assert record is not None
        if record.state is not AttemptStatus.STARTING:
            self._release(key, Path(record.dir))
            return False
        if record.cancel_reason is not None:
            self._report_exit(key, exit_info(None, None, record.cancel_reason))
            return False
        return True

    async def _prepare_data(self, key: Key, adir: AttemptDir,
                            msg: StartJob) -> dict[str, str] | str:
        """The hook's environment for the job, or why it could not be prepared (a prefetch
        can take minutes: a cancel stops it)."""
        task = await self._cancellable(key, self._hooks.prepare(msg, adir, self._emitter(key)))
        if task.cancelled():
            return "preparation was interrupted"
        error = task.exception()
        if isinstance(error, BourseError):
            return error.message + (f" ({error.hint})" if error.hint else "")
        if error is not None:
            log.error("preparing attempt %s failed", key, exc_info=error)
            return f"preparing the job failed: {error}"
        return task.result()

    async def _meet(self, key: Key, msg: StartJob,
                    meeting: gang.Meeting | None) -> dict[str, str] | str:
        """A gang member's rendezvous (``agent.gang``): its variables, or why it failed (a
        cancel stops the wait)."""
        if msg.gang is None:
            return {}
        timeout = msg.gang.timeout_s
        waiting = meeting.gather(timeout) if meeting is not None else gang.join(msg.gang, timeout)
        task = await self._cancellable(key, waiting)
        if task.cancelled():
            return "the rendezvous was interrupted"
        error = task.result()
        if error is not None:
            return error
        port = meeting.port if meeting is not None else msg.gang.port
        assert port is not None
        return gang.environment(msg.gang, port)

    async def _cancellable(self, key: Key, step: Awaitable[T]) -> asyncio.Future[T]:
        """Run a step of a start as a task that ``cancel`` can stop; the finished task."""
        task = asyncio.ensure_future(step)
        self._preparing[key] = task
        try:
            await asyncio.wait([task])
        finally:
            self._preparing.pop(key, None)
        return task

    def _emitter(self, key: Key) -> Emit:
        def emit(kind: str, data: dict[str, Any]) -> None:
            record = self._spool.get_attempt(*key)
            if record is not None and record.state is not AttemptStatus.STALE:
                self._spool.append_event(*key, kind, data, time.time())
        return emit

    async def _prepare(self, adir: AttemptDir, msg: StartJob,
                       bundle: Path | None) -> Path | str:
        """The job's cwd, or why it could not be prepared. In a thread: extraction, and the
        isolation's set-up (a mount, a lock on the node's job users)."""
        def run() -> Path:
            self._isolation.end(adir.root)  # left by an attempt no record knows of
            return prepare(adir, msg, bundle, self._isolation.setup)
        try:
            if bundle is None and not self._isolation.wipes:
                return run()
            return await asyncio.to_thread(run)
        except StartError as e:
            return e.message + (f" ({e.hint})" if e.hint else "")
        except (OSError, ValueError) as e:
            return str(e)

    def _record_started(self, key: Key, pid: int, started: int | None) -> AttemptRecord:
        with self._spool.atomic():
            record = self._spool.update_attempt(*key, state=AttemptStatus.RUNNING, pid=pid,
                                                proc_start=started)
            self._spool.append_event(*key, "started", {"pid": pid}, time.time())
        return record

    def _recover_starting(self, record: AttemptRecord) -> AttemptRecord:
        """An attempt the last agent was starting: the shim leaves a pid file once it runs."""
        key = (record.job_id, record.attempt)
        pid = shim.read_int(AttemptDir(Path(record.dir)).pid_file)
        if pid is None:
            self._fail_start(key, "the agent restarted before the job's process started")
            return record
        return self._record_started(key, pid, shim.start_time(pid, since=record.created))

    def _fail_start(self, key: Key, reason: str, *, elsewhere: bool = False) -> None:
        """``elsewhere``: the node, not the job, is why (``retry_elsewhere``: the coordinator
        places the job on another node, as after a node loss)."""
        data: dict[str, Any] = {"reason": reason}
        if elsewhere:
            data[RETRY_ELSEWHERE] = True
        with self._spool.atomic():
            row = self._spool.append_event(*key, "start_failed", data, time.time())
            record = self._spool.update_attempt(*key, state=AttemptStatus.START_FAILED,
                                                reason=reason, final_row=row)
        self._release(key, Path(record.dir))

    def _report_exit(self, key: Key, info: dict[str, Any]) -> None:
        with self._spool.atomic():
            row = self._spool.append_event(*key, "exited", info, time.time())
            record = self._spool.update_attempt(*key, state=AttemptStatus.EXITED, final_row=row,
                                                exit_code=info["exit_code"],
                                                exit_signal=info["signal"],
                                                reason=info["reason"])
        self._release(key, Path(record.dir))

    def _release(self, key: Key, root: Path) -> None:
        """The attempt is over: the hooks' leftovers, then (isolated) its whole directory."""
        self._hooks.release(*key, root)
        self._isolation.end(root)
        if self._isolation.wipes:
            self._unswept.add(key)

    # --- watching ----------------------------------------------------------------------------

    def _watch(self, record: AttemptRecord, start: StartJob | None = None) -> None:
        assert record.pid is not None
        key = (record.job_id, record.attempt)
        adir = AttemptDir(Path(record.dir))
        tailer = LogTailer(self._spool, *key, paths=(adir.stdout, adir.stderr),
                           offsets=(record.stdout_offset, record.stderr_offset),
                           chunk_bytes=self._chunk, max_pending=self._max_pending,
                           limit=self._log_limit, now=time.time(),
                           holds=redact.patterns(start.secret_env.values()) if start else (),
                           track=TrackTailer(self._spool, *key, track_file(adir)))
        watch = Watch(key, adir, record.pid, record.proc_start, tailer, kill_at=record.kill_at,
                       stale=record.state is AttemptStatus.STALE, start=start)
        self._watches[key] = watch
        watch.task = asyncio.create_task(self._monitor(watch), name=f"attempt {key}")

    async def _monitor(self, watch: Watch) -> None:
        try:
            ended = await watching.wait_exit(watch, self._poll)
            drop_beside(watch.adir)  # exec needs a running job; its store keys go with it
            if watch.seen_alive:  # leftovers of the job in its group (never a reused pgid)
                shim.signal_group(watch.pid, signal.SIGKILL)
            if self._isolation.pool is not None:  # and of its user (no thread hop without)
                await asyncio.to_thread(self._isolation.stop, watch.adir)
            await self._import_tensorboard(watch)
            while not (watch.stale or watch.tailer.step(time.time(), final=True)):
                await asyncio.sleep(self._poll)
            if watch.stale:
                self._release(watch.key, watch.adir.root)
            else:
                await self._report_end(watch, ended)
        except Exception:
            log.exception("watching attempt %s failed", watch.key)
            raise
        finally:
            if self._watches.get(watch.key) is watch:
                del self._watches[watch.key]

    async def _import_tensorboard(self, watch: Watch) -> None:
        """The TensorBoard scalars the job left, into its run (``agent.tensorboard``)."""
        record = None if watch.stale else self._spool.get_attempt(*watch.key)
        try:
            msg = watch.start_message(record) if record is not None else None
        except ValueError:  # unreadable: nothing of the job is followed
            return
        if msg is not None:
            await tensorboard.import_after(msg, watch.adir, self._emitter(watch.key))

    async def _report_end(self, watch: Watch, ended: Ended) -> None:
        record = self._spool.get_attempt(*watch.key)
        assert record is not None
        status = shim.read_int(watch.adir.exit_file)
        info = exit_info(status, ended.wait_status, record.cancel_reason)
        info["exited_at"] = ended.at
        if record.cancel_reason is not None:  # the agent had asked it to stop (SIGTERM)
            info["signalled"] = True
        if watch.adir.fenced_file.exists():  # given up as far as it knows: nothing uploaded
            info |= {"fenced": True, "reason": FENCED_REASON}
        else:
            info |= await self._finish(watch, record, info)
        record = self._spool.get_attempt(*watch.key)
        assert record is not None
        if record.state is AttemptStatus.STALE:  # given up while finishing
            self._release(watch.key, watch.adir.root)
            return
        self._report_exit(watch.key, info)

    async def _finish(self, watch: Watch, record: AttemptRecord,
                      info: dict[str, Any]) -> dict[str, Any]:
        try:
            msg = watch.start_message(record)
        except ValueError:
            log.error("attempt %s: its recorded start message is unreadable", watch.key)
            return {}
        try:
            return await self._hooks.finish(msg, watch.adir, info, self._emitter(watch.key))
        except Exception as exc:
            log.exception("finishing attempt %s failed", watch.key)
            return {"outputs_error": f"the agent failed after the job ended: {exc}"}
