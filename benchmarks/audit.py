"""What the audit trail and tenancy cost a request: job submissions (a mutating call, audited)
and job reads (scoped), in process on SQLite, with the audit recorder on and, as the baseline
in the same run, replaced by a no-op; and audited without the seal of the chain's head
(``server/audit_seal``), to show what the seal adds. Also: `audit verify` over the chain
built.

    python benchmarks/audit.py [--requests 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bourse.server.app import create_app
from bourse.server.config import ServerConfig, StoreConfig
from bourse.server.services import audit

SPEC = {"command": ["true"], "compute": {"cpus": 1}}
APPEND = audit.append


async def _nothing(*_args: object) -> list[object]:
    return []


async def measure(root: Path, requests: int, audited: bool,
                  sealed: bool = True) -> dict[str, float]:
    config = ServerConfig(data_dir=root / "data", credentials_path=root / "cred.json",
                          store=StoreConfig.none())
    app = create_app(config, run_scheduler=False)
    figures: dict[str, float] = {}
    audit.append = APPEND if audited else _nothing  # type: ignore[assignment]
    async with app.router.lifespan_context(app):
        if not sealed:
            app.state.bourse.audit_writer.seal = app.state.bourse.audit_writer.sealed = None
        token = json.loads((root / "cred.json").read_text())["token"]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://b.test",
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            times = []
            for _ in range(requests):
                t0 = time.perf_counter()
                response = await client.post("/api/v1/jobs", json=SPEC)
                times.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 201
            figures["submit p50 ms"] = statistics.median(times)
            job_id = response.json()["id"]
            times = []
            for _ in range(requests):
                t0 = time.perf_counter()
                await client.get(f"/api/v1/jobs/{job_id}")
                times.append((time.perf_counter() - t0) * 1000)
            figures["read p50 ms"] = statistics.median(times)
            t0 = time.perf_counter()
            verdict = (await client.get("/api/v1/audit/verify")).json()
            figures["verify ms"] = (time.perf_counter() - t0) * 1000
            figures["verified rows"] = verdict["checked"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with (tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b,
          tempfile.TemporaryDirectory() as c):
        base = asyncio.run(measure(Path(a), args.requests, audited=False))
        unsealed = asyncio.run(measure(Path(c), args.requests, audited=True, sealed=False))
        audited = asyncio.run(measure(Path(b), args.requests, audited=True))
    audit.append = APPEND  # type: ignore[assignment]
    print(f"{'':<16}{'no audit (baseline)':>22}{'audited, no seal':>18}{'audited':>12}")
    for name in base:
        print(f"{name:<16}{base[name]:>22.2f}{unsealed[name]:>18.2f}{audited[name]:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
