"""``python -m bourse.app.runner``: runs one stage's body inside its job.

Re-imports the project's module that defines the stage (as ``__bourse_app__``, so that an
``if __name__ == "__main__"`` block does not run again), rebuilds the stage from its
attributes, gives it its data (``inputs``, ``outputs``, ``checkpoint`` from the environment
the exchange or the local runner set), calls the body and prints its return value on a
marked last line.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from bourse.app.call import (
    APP_MODULE,
    CALL_VAR,
    INPUT_MARKER,
    attributes_line,
    changed_attributes,
    decode_state,
    result_line,
    snapshot,
)
from bourse.app.context import enter_job
from bourse.app.result import Outputs
from bourse.app.source import exec_source
from bourse.app.work import Work
from bourse.storage.jobenv import CHECKPOINT_VAR, input_var, output_var


def load_class(file: str, qualname: str, path: list[str]) -> type[Work]:
    # the folders the driver had first on sys.path (the app's, the stage's), then the project
    sys.path[:0] = [str(Path(folder).resolve()) for folder in path] + [os.getcwd()]
    module = exec_source(APP_MODULE, Path(file))
    if module is None:
        raise SystemExit(f"bourse: cannot load {file}")
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part)
    assert isinstance(target, type) and issubclass(target, Work)
    return target


def _arg(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {INPUT_MARKER}:
        return Path(os.environ[input_var(value[INPUT_MARKER])])
    return value


def main() -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):  # each line reaches the log when printed, in
        sys.stdout.reconfigure(line_buffering=True)  # order with an error's traceback
    call = json.loads(os.environ[CALL_VAR])
    cls = load_class(call["file"], call["class"], call.get("path", []))
    work = cls.__new__(cls)
    vars(work).update(decode_state(call["state"]))
    names = [k for k in os.environ if k.startswith("BOURSE_INPUT_") and not k.endswith("_URI")]
    work.inputs = {n.removeprefix("BOURSE_INPUT_").lower(): Path(os.environ[n]) for n in names}
    work.outputs = Outputs({name: Path(os.environ[output_var(name)])
                            for name in call["outputs"]}, stage=work.name)
    for path in work.outputs.values():
        path.mkdir(parents=True, exist_ok=True)
    work.checkpoint = os.environ.get(CHECKPOINT_VAR)
    enter_job()
    assert cls._body is not None
    before = snapshot(work)
    value = cls._body(work, *map(_arg, call["args"]),
                      **{k: _arg(v) for k, v in call["kwargs"].items()})
    sys.stdout.flush()
    print("\n" + attributes_line(_passed_back(before, work)), flush=True)
    print(result_line(value), flush=True)
    return 0


def _passed_back(before: dict[str, str | int], work: Work) -> dict[str, Any]:
    """What the body set on ``self`` that goes back to the flow; a line on stderr for what
    cannot."""
    changed, refused = changed_attributes(before, work)
    if refused:
        print(f"bourse: stage {work.name!r} set attributes that are not JSON, which stay in "
              f"the job: {', '.join(refused)}; return them, or write them to an output",
              file=sys.stderr, flush=True)
    return changed


if __name__ == "__main__":
    sys.exit(main())
