"""TensorBoard beside a stage: ``Work(..., tensorboard="logs")``.

The stage's command runs under this module's launcher (``python -m bourse.app.tensorboard``),
which starts ``tensorboard --logdir <dir> --host 127.0.0.1 --port 6006 --path_prefix
/jobs/<job id>/ports/6006`` when TensorBoard is importable on the node, runs the command, stops
TensorBoard and exits with the command's code. The port is declared with ``path="keep"``: the
coordinator forwards the whole path and TensorBoard, told its prefix, serves below it. Without
TensorBoard on the node the command runs alone and a line on stderr says why.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from bourse.protocol.common import Port

PORT = 6006
STOP_GRACE_S = 10.0


def port() -> Port:
    return Port(number=PORT, path="keep")


def prefix(job_id: str, number: int = PORT) -> str:
    return f"/jobs/{job_id}/ports/{number}"


def launcher(logdir: str, command: list[str], number: int = PORT,
             python: str = "python") -> list[str]:
    """``command`` under the launcher (the node runs the same Python as the job)."""
    return [python, "-m", "bourse.app.tensorboard", logdir, str(number), "--", *command]


def tensorboard_argv(logdir: str, job_id: str, number: int) -> list[str]:
    return [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host",
            "127.0.0.1", "--port", str(number), "--path_prefix", prefix(job_id, number)]


def start(logdir: str, job_id: str | None, number: int) -> subprocess.Popen[bytes] | None:
    if importlib.util.find_spec("tensorboard") is None:
        print("bourse: tensorboard is not installed on this node; the stage runs without it "
              "(pip install 'bourse[tensorboard]')", file=sys.stderr, flush=True)
        return None
    if job_id is None:
        print("bourse: not running as a job (no BOURSE_JOB_ID); TensorBoard not started",
              file=sys.stderr, flush=True)
        return None
    Path(logdir).mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(tensorboard_argv(logdir, job_id, number), stdin=subprocess.DEVNULL)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--" or not argv[1].isdigit():
        print("usage: python -m bourse.app.tensorboard LOGDIR PORT -- COMMAND...",
              file=sys.stderr)
        return 2
    logdir, number, command = argv[0], int(argv[1]), argv[3:]
    board = start(logdir, os.environ.get("BOURSE_JOB_ID"), number)
    try:
        return subprocess.call(command)
    finally:
        if board is not None:
            board.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                board.wait(STOP_GRACE_S)
            board.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
