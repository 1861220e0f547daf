"""A plain (non-Lightning) job that follows the checkpoint contract: it counts to N, saving
its count as a complete checkpoint every K steps and when told to stop (SIGTERM), and
resumes from the newest complete checkpoint. Modes:

- ``count N K``: as above; prints ``RESUMED FROM <step>`` and ``DONE <N>``.
- ``count N K mlflow``: the same, logging ``count`` at each step with plain
  ``mlflow.log_metric`` to the run bourse gives the job (``MLFLOW_RUN_ID``), and printing
  ``COUNTED <step>``.
- ``stubborn``: ignores SIGTERM; saves a complete checkpoint at step 1, then uploads the files
  of step 2 without their marker (an upload in progress) and hangs. A later attempt prints
  the step it found and exits 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bourse.storage.checkpoint import latest_complete, save_checkpoint
from bourse.storage.remote import Stores
from bourse.storage.settings import StoreSettings

URI = os.environ["BOURSE_CHECKPOINT_URI"]
STORES = Stores(StoreSettings.from_env(os.environ))
STEP_S = 0.1


def latest() -> int:
    found = asyncio.run(latest_complete(STORES, URI))
    return 0 if found is None or found.step is None else found.step


def save(step: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "count").write_text(str(step))
        asyncio.run(save_checkpoint(STORES, Path(tmp), URI, step=step))


def count(n: int, every: int, tracked: bool = False) -> None:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    log = mlflow_logger() if tracked else None
    step = latest()
    print(f"RESUMED FROM {step} resume={os.environ.get('BOURSE_RESUME')}", flush=True)
    while step < n:
        time.sleep(STEP_S)
        step += 1
        if log is not None:
            log(step)
        if step % every == 0 or stop:
            save(step)
        if stop:
            sys.exit(143)
    print(f"DONE {step}", flush=True)


def mlflow_logger() -> Callable[[int], None]:
    """Plain MLflow, as any script uses it: ``start_run`` continues the job's run."""
    import mlflow

    mlflow.start_run()

    def log(step: int) -> None:
        mlflow.log_metric("count", float(step), step=step)
        print(f"COUNTED {step}", flush=True)

    return log


def stubborn() -> None:
    if os.environ.get("BOURSE_RESUME") == "1":
        print(f"RESUMED FROM {latest()}", flush=True)
        return
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    save(1)
    prefix = URI.rstrip("/") + "/step-000000000002/"
    from bourse.core.uri import parse_uri

    target = parse_uri(prefix)
    asyncio.run(STORES(target).put(target.join("count").key, b"2"))  # no marker: in progress
    print("UPLOADING", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    if sys.argv[1] == "count":
        count(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] == ["mlflow"])
    else:
        stubborn()
