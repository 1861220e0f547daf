"""A fork server for the end-to-end tests' `python -m bourse` processes.

A coordinator spends most of its start importing (FastAPI, SQLAlchemy, pydantic models: about
85 % of its CPU to readiness), an agent the same for its own modules, and the suite starts
hundreds of them. The zygote is one process per test worker that imports those modules once
and then, for each start, forks: the child is a real, separate process — its own pid, session
and process group, log file, environment and working directory — that runs ``python -m
bourse ARGS`` as the interpreter would (``runpy``, then the threads' and ``atexit``'s shutdown),
so killing it with SIGKILL, signalling it, or restarting it on the same data is what the tests
do to a process started from scratch. What a fork cannot give is left to ``subprocess``: a
start with a prefix (``ip netns exec``) execs a fresh interpreter as before.

Nothing in bourse reads the environment at import time (``tests/test_zygote.py`` checks it),
so the modules imported here hold no state of the zygote's own environment.
``BOURSE_TEST_ZYGOTE=0`` turns the zygote off (every start a fresh interpreter).

Run as ``python zygote.py SOCKET``; ``Zygote`` is the test worker's side.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PRELOAD = ("bourse.cli.main", "bourse.cli.server", "bourse.cli.agent", "bourse.server.app",
           "bourse.agent.daemon", "uvicorn", "websockets")
START_S = 120.0  # the zygote's own imports, on a loaded 2-core machine


# --- the worker's side ---------------------------------------------------------------------------

class Forked:
    """A process the zygote forked, with the part of ``subprocess.Popen`` the tests use."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Zygote:
    """The worker's zygote: started on first use, stopped when the worker exits."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bourse-zygote-"))
        self.socket = self.dir / "socket"
        self.log = self.dir / "zygote.log"
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                [sys.executable, __file__, str(self.socket)], stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        atexit.register(self.stop)
        deadline = time.monotonic() + START_S
        while not self.socket.exists():
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the zygote did not start:\n{self.log.read_text()}")
            time.sleep(0.02)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(self.socket))
            sock.sendall(json.dumps(request).encode() + b"\n")
            answer = sock.makefile("rb").readline()
        if not answer:
            raise RuntimeError(f"the zygote did not answer:\n{self.log.read_text()}")
        reply: dict[str, Any] = json.loads(answer)
        if "error" in reply:
            raise RuntimeError(f"the zygote refused {request['op']}: {reply['error']}")
        return reply

    def spawn(self, args: Sequence[str], env: Mapping[str, str], log: Path) -> Forked:
        reply = self._ask({"op": "spawn", "args": list(args), "env": dict(env),
                           "cwd": os.getcwd(), "log": str(log)})
        return Forked(self, int(reply["pid"]))

    def status(self, pid: int) -> int | None:
        code = self._ask({"op": "status", "pid": pid})["code"]
        return None if code is None else int(code)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        with contextlib.suppress(OSError):
            self.socket.unlink()
            self.log.unlink()
            self.dir.rmdir()


class _Worker:
    zygote: Zygote | None = None
    broken = False  # it could not start: fresh interpreters from then on


def zygote() -> Zygote | None:
    """This worker's zygote, or None when it is turned off or could not start (then every
    start is a fresh interpreter, as without it)."""
    if (_Worker.zygote is None and not _Worker.broken
            and os.environ.get("BOURSE_TEST_ZYGOTE", "1") != "0"):
        try:
            _Worker.zygote = Zygote()
        except (OSError, RuntimeError) as exc:
            _Worker.broken = True
            print(f"zygote off: {exc}", file=sys.stderr)
    return _Worker.zygote


def start_bourse(args: Sequence[str], env: Mapping[str, str],
                 log: Path) -> subprocess.Popen[bytes] | Forked:
    """``python -m bourse ARGS`` in a session of its own, writing to ``log`` (opened for
    appending): forked by the worker's zygote, or a fresh interpreter without one."""
    forks = zygote()
    if forks is not None:
        return forks.spawn(args, env, log)
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "bourse", *args], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=dict(env))


# --- the zygote ----------------------------------------------------------------------------------

def serve(path: str) -> None:
    for module in PRELOAD:
        __import__(module)
    codes: dict[int, int] = {}
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    os.rename(path + ".new", path)  # the socket appears only once it listens
    listener.listen(64)
    listener.settimeout(1.0)
    while os.getppid() == parent:  # the worker is gone: so is its zygote
        _reap(codes)
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        with conn:
            conn.settimeout(None)
            request = json.loads(conn.makefile("rb").readline())
            try:
                reply = _handle(request, codes, listener, conn)
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            conn.sendall(json.dumps(reply).encode() + b"\n")


def _reap(codes: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        codes[pid] = os.waitstatus_to_exitcode(status)


def _handle(request: dict[str, Any], codes: dict[int, int], listener: socket.socket,
            conn: socket.socket) -> dict[str, Any]:
    if request["op"] == "status":
        _reap(codes)
        pid = int(request["pid"])
        return {"code": codes.get(pid)}
    if request["op"] == "spawn":
        pid = os.fork()
        if pid == 0:
            _child(request, (listener, conn))
        return {"pid": pid}
    raise ValueError(f"unknown op {request['op']!r}")


def _child(request: dict[str, Any], sockets: Sequence[socket.socket]) -> None:
    """Become ``python -m bourse ARGS``; never returns."""
    code = 1
    try:
        for sock in sockets:
            sock.close()
        os.setsid()
        out = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.close(null)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]  # as `python -m` has it
        code = _run(request["args"])
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _run(args: Sequence[str]) -> int:
    """``python -m bourse ARGS`` and the interpreter's exit: its status, after the non-daemon
    threads and ``atexit``'s functions, as ``Py_Finalize`` runs them."""
    import runpy

    sys.argv = ["bourse", *args]
    code = 0
    try:
        runpy.run_module("bourse", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    serve(sys.argv[1])
