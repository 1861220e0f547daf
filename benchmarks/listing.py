"""Listing jobs with a million in the database: `GET /api/v1/jobs` latency, page by page.

One local coordinator (SQLite, no agent). Jobs are written straight into its database (one
real job submitted through the API, cloned in SQL as ended jobs, newest last), first
``--small`` of them (the baseline, same run, same process), then up to ``--jobs``. For each
size, every query is asked ``--requests`` times over HTTP (the SDK's client, as `bourse jobs`
asks): the first page as an admin (every project's jobs), the first page as a member of a
project that holds a tenth of them, a state filter, and pages deep in the list by the cursor
(``before``: the id of the last job of the page before). Printed: p50 / p99 per query and the
ratio of the large database's p99 over the small one's. Target (issue 24): p99 < 100 ms with
1,000,000 jobs. ``--database-url`` runs the coordinator on PostgreSQL instead (a throwaway
database: its jobs table is written).

    python benchmarks/listing.py [--jobs 1000000] [--small 1000] [--requests 200]
                                 [--database-url postgresql+asyncpg://...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _exchange import local_exchange, percentile
from bourse.protocol.common import JobSpec
from bourse.sdk.client import Client

PROJECT = "tenth"  # holds every tenth cloned job


def clone_sql(columns: list[str], start: int, total: int, postgres: bool) -> str:
    """Clone the template (the query's one parameter) as ended jobs ``start``..``total``-1:
    ids ``j-b<n>``, one ms apart, every tenth in project ``tenth``."""
    ident = "'j-b' || lpad(n::text, 8, '0')" if postgres else "printf('j-b%08d', n)"
    chosen = {"id": ident, "state": "'SUCCEEDED'",
              "created_at": "1.0e9 + n * 0.001", "updated_at": "1.0e9 + n * 0.001",
              "project_id": f"CASE WHEN n % 10 = 0 THEN '{PROJECT}' ELSE project_id END",
              "node_id": "NULL"}
    values = ", ".join(chosen.get(c, c) for c in columns)
    series = (f"generate_series({start}, {total - 1}) AS s(n)" if postgres else "s")
    head = "" if postgres else (f"WITH RECURSIVE s(n) AS (SELECT {start} UNION ALL "
                                f"SELECT n + 1 FROM s WHERE n + 1 < {total}) ")
    template = "(SELECT * FROM jobs WHERE id = $1) t" if postgres else \
        "(SELECT * FROM jobs WHERE id = ?) t"
    return (f"{head}INSERT INTO jobs ({', '.join(columns)}) SELECT {values} "
            f"FROM {series}, {template}")


def grow(db: Path | str, template: str, total: int, start: int) -> None:
    if isinstance(db, str):
        asyncio.run(_grow_postgres(db, template, total, start))
        return
    with sqlite3.connect(db, timeout=60) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
        conn.execute(clone_sql(columns, start, total, postgres=False), (template,))
        conn.execute("ANALYZE")


async def _grow_postgres(url: str, template: str, total: int, start: int) -> None:
    import asyncpg  # type: ignore[import-untyped]
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        columns = [r["column_name"] for r in await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs' "
            "ORDER BY ordinal_position")]
        await conn.execute(clone_sql(columns, start, total, postgres=True), template)
        await conn.execute("ANALYZE jobs")
    finally:
        await conn.close()


def timed(ask: Callable[[], object], requests: int) -> tuple[float, float]:
    ask()  # warm
    took = []
    for _ in range(requests):
        t0 = time.perf_counter()
        ask()
        took.append((time.perf_counter() - t0) * 1000)
    return percentile(took, 0.5), percentile(took, 0.99)


def member_token(url: str, env: dict[str, str]) -> str:
    def cli(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "bourse", *args], check=True, env=env,
                              capture_output=True, text=True).stdout
    cli("projects", "create", PROJECT)
    return str(json.loads(cli("tokens", "create", "--project", PROJECT, "--json"))["token"])


def queries(admin: Client, member: Client, total: int) -> dict[str, Callable[[], object]]:
    deep = f"j-b{total // 2:08d}"
    return {
        "admin, first page": lambda: admin.jobs(limit=100),
        "member of a tenth, first page": lambda: member.jobs(limit=100),
        "admin, state=SUCCEEDED": lambda: admin.jobs("SUCCEEDED", 100),
        "admin, state=PENDING (rare)": lambda: admin.jobs("PENDING", 100),
        "member, state=PENDING (rare)": lambda: member.jobs("PENDING", 100),
        "admin, page half-way down": lambda: admin.jobs(limit=100, before=deep),
        "member, page half-way down": lambda: member.jobs(limit=100, before=deep),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--database-url", help="a PostgreSQL database for the coordinator "
                        "(postgresql+asyncpg://...; its jobs table is written): default SQLite")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the exchange is stopped
    server_args = ["--database-url", args.database_url] if args.database_url else []
    with local_exchange(agents=0, server_args=server_args) as (admin, _status, root):
        db = args.database_url or next((root / "local").rglob("bourse.db"))
        template = admin.submit(JobSpec(command=["true"], name="template")).id
        admin.cancel(template)
        token = member_token(admin.url, dict(os.environ))
        with Client(admin.url, token, timeout=120) as member:
            results: dict[int, dict[str, tuple[float, float]]] = {}
            done = 0
            for size in (args.small, args.jobs):
                t0 = time.perf_counter()
                grow(db, template, size, done)
                done = size
                print(f"{size:,} jobs written in {time.perf_counter() - t0:.1f} s", flush=True)
                results[size] = {name: timed(ask, args.requests)
                                 for name, ask in queries(admin, member, size).items()}
    small, large = results[args.small], results[args.jobs]
    print(f"\n{'query':34} {args.small:>9,} p50/p99 ms {args.jobs:>11,} p50/p99 ms  ratio p99")
    for name, (p50, p99) in large.items():
        s50, s99 = small[name]
        print(f"{name:34} {s50:9.1f} / {s99:6.1f}    {p50:9.1f} / {p99:6.1f}    "
              f"x{p99 / s99:.2f}")


if __name__ == "__main__":
    main()
