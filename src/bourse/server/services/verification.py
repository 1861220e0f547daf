"""Node verification on the coordinator: the agent measures, the coordinator decides.

A node gets work only once a probe report for its current hardware fingerprint has been
judged ``pass`` or ``warn`` by ``core.verification`` (unless the server runs with
``--allow-unverified``). A changed fingerprint sends it back to ``unverified``.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput
from bourse.core.verification import verify
from bourse.protocol.common import Capabilities, Check, Declared, ProbeReport, VerificationReport
from bourse.server.db.schema import Node

log = logging.getLogger(__name__)
PLACEABLE = ("pass", "warn")


def on_hello(node: Node, caps: Capabilities, declared: Declared | None) -> None:
    """Record what the provider declares; forget the verdict if the hardware changed."""
    if node.launch_id is None:  # a launched node's declaration is its offer's, not its own
        node.declared = declared.model_dump(mode="json") if declared else None
    if caps.fingerprint and node.fingerprint and caps.fingerprint != node.fingerprint:
        log.warning("node %s (%s): hardware fingerprint changed; verifying again",
                    node.id, node.name)
        node.verification_status, node.verified_at = "unverified", None
    if caps.fingerprint:
        node.fingerprint = caps.fingerprint


async def record_report(session: AsyncSession, node_id: str, report: ProbeReport,
                        now: float) -> VerificationReport:
    node = await session.get(Node, node_id)
    if node is None:
        raise LookupError(f"node {node_id} is not enrolled")
    declared = Declared.model_validate(node.declared) if node.declared else None
    verdict = judge(report, declared)
    if node.fingerprint and report.fingerprint and node.fingerprint != report.fingerprint:
        check = Check(name="fingerprint", status="fail",
                      reason="the report is for other hardware than the node said hello with")
        verdict = verdict.model_copy(update={"status": "fail",
                                             "checks": [check, *verdict.checks]})
    node.report = report.model_dump(mode="json")
    node.verification = verdict.model_dump(mode="json")
    node.verification_status, node.verified_at = verdict.status, now
    node.fingerprint = node.fingerprint or report.fingerprint or None
    log.info("node %s (%s) verified: %s", node.id, node.name, verdict.status)
    return verdict


def judge(report: ProbeReport, declared: Declared | None) -> VerificationReport:
    try:
        return verify(report, declared)
    except InvalidInput as exc:  # a declaration the catalogue cannot read
        check = Check(name="declared", status="fail", reason=f"declaration refused: {exc}")
        return VerificationReport(status="fail", checks=[check],
                                  fingerprint=report.fingerprint)
