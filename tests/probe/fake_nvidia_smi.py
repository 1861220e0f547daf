"""A fake ``nvidia-smi`` that replays real captures (tests/fixtures/nvidia-smi).

The test copies this file into a temporary directory as ``nvidia-smi``, puts that directory
first on PATH and writes ``capture.json`` beside it: which capture answers ``-q -x``, ``-q``,
``--query-gpu`` and the plain invocation. ``--query-gpu`` picks the requested columns out of a
CSV capture by header name and, like nvidia-smi, rejects a field it does not know with
``Field "x" is not a valid field to query.``. A form with no capture fails as nvidia-smi does
when it cannot answer (a message and a non-zero exit). ``flood`` and ``hang`` simulate a
broken tool: endless output, or no answer.
"""

import csv
import json
import re
import sys
import time
from pathlib import Path

CONFIG = json.loads(Path(__file__).with_name("capture.json").read_text())


def replay(key):
    if CONFIG.get("hang"):
        time.sleep(60)
    if CONFIG.get("flood") == key:
        chunk = "<gpu>" + "x" * 65530 + "\n"
        for _ in range(CONFIG.get("flood_mb", 50) * 16):
            sys.stdout.write(chunk)
        return 0
    path = CONFIG.get(key)
    if not path:
        print(f"fake nvidia-smi: no {key} capture for this machine", file=sys.stderr)
        return 9
    sys.stdout.write(Path(path).read_text())
    return 0


def query(fields, fmt):
    if not CONFIG.get("csv"):
        return replay("csv")
    with open(CONFIG["csv"], newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header = [h.strip() for h in rows[0]]
    names = [h.split(" [")[0] for h in header]
    for field in fields:
        if field not in names:
            print(f'Field "{field}" is not a valid field to query.\n')
            return 2
    columns = [names.index(f) for f in fields]
    if "noheader" not in fmt:
        print(", ".join(header[c] for c in columns))
    for row in rows[1:]:
        values = [row[c].strip() for c in columns]
        if "nounits" in fmt:
            values = [re.sub(r" (MiB|W|MHz|%|us)$", "", v) for v in values]
        print(", ".join(values))
    return 0


def main(args):
    fields = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
    fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "")
    if fields is not None:
        return query(fields.split(","), fmt.split(","))
    if sorted(args) == ["-q", "-x"]:
        return replay("xml")
    if args == ["-q"]:
        return replay("text")
    if not args:
        return replay("table")
    print(f"fake nvidia-smi: unsupported arguments {args}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
