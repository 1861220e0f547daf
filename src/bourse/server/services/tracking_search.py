"""Searching runs with MLflow's syntax: the parsed clauses of ``core.runsearch`` become one
SQL statement (each metric, param or tag clause an EXISTS on its table; metrics compare the
latest point, as MLflow's do), ordered and paged by offset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, exists, func, not_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.runsearch import Clause, Order, parse_filter, parse_order_by
from bourse.server.access import Scope
from bourse.server.db.schema import TrackingLatest, TrackingParam, TrackingRun, TrackingTag

MAX_RESULTS = 50_000  # MLflow's own ceiling for runs/search
ATTRIBUTE_COLUMNS: dict[str, Any] = {
    "run_id": TrackingRun.id, "run_name": TrackingRun.name, "status": TrackingRun.status,
    "user_id": TrackingRun.user_id, "start_time": TrackingRun.start_time,
    "end_time": TrackingRun.end_time, "lifecycle_stage": TrackingRun.lifecycle_stage,
    "artifact_uri": TrackingRun.id,
}


def _compare(column: Any, op: str, value: Any) -> ColumnElement[bool]:
    comparisons: dict[str, Any] = {
        "=": lambda: column == value, "!=": lambda: column != value,
        "<": lambda: column < value, "<=": lambda: column <= value,
        ">": lambda: column > value, ">=": lambda: column >= value,
        "LIKE": lambda: column.like(value), "ILIKE": lambda: func.lower(column).like(
            str(value).lower()),
        "IN": lambda: column.in_(list(value)), "NOT IN": lambda: column.not_in(list(value)),
    }
    result: ColumnElement[bool] = comparisons[op]()
    return result


def clause_sql(clause: Clause) -> ColumnElement[bool]:
    if clause.kind == "attribute":
        return _compare(ATTRIBUTE_COLUMNS[clause.key], clause.op, clause.value)
    table: Any = {"metric": TrackingLatest, "param": TrackingParam, "tag": TrackingTag}[
        clause.kind]
    match = exists().where(table.run_id == TrackingRun.id, table.key == clause.key,
                           _compare(table.value, clause.op, clause.value))
    if clause.kind == "tag" and clause.op == "!=":  # MLflow: a run without the tag matches
        return not_(exists().where(table.run_id == TrackingRun.id, table.key == clause.key,
                                   table.value == clause.value))
    return match


def _order_column(order: Order) -> Any:
    if order.kind == "attribute":
        return ATTRIBUTE_COLUMNS[order.key]
    table: Any = {"metric": TrackingLatest, "param": TrackingParam, "tag": TrackingTag}[
        order.kind]
    return (select(table.value).where(table.run_id == TrackingRun.id, table.key == order.key)
            .scalar_subquery())


def search_query(scope: Scope, experiment_ids: Sequence[str], filter_text: str | None,
                 order_by: Sequence[str] | None, view: str = "ACTIVE_ONLY") -> Select[Any]:
    """The statement of a search (without its page); SearchError on a bad filter."""
    clauses = parse_filter(filter_text)
    orders = parse_order_by(list(order_by or []))
    query = scope.filter(select(TrackingRun), TrackingRun.project_id)
    if experiment_ids:
        query = query.where(TrackingRun.experiment_id.in_(list(experiment_ids)))
    if view == "ACTIVE_ONLY":
        query = query.where(TrackingRun.lifecycle_stage == "active")
    elif view == "DELETED_ONLY":
        query = query.where(TrackingRun.lifecycle_stage == "deleted")
    if clauses:
        query = query.where(and_(*(clause_sql(c) for c in clauses)))
    keys = []
    for order in orders:
        column = _order_column(order)
        keys += [column.is_(None), column.asc() if order.ascending else column.desc()]
    keys += [TrackingRun.start_time.desc(), TrackingRun.id]
    return query.order_by(*keys)


async def search_runs(session: AsyncSession, scope: Scope, experiment_ids: Sequence[str],
                      filter_text: str | None, order_by: Sequence[str] | None, *,
                      limit: int, offset: int,
                      view: str = "ACTIVE_ONLY") -> tuple[list[TrackingRun], bool]:
    """A page of runs, and whether there are more."""
    query = search_query(scope, experiment_ids, filter_text, order_by, view)
    rows = list(await session.scalars(query.offset(offset).limit(min(limit, MAX_RESULTS) + 1)))
    return rows[:limit], len(rows) > limit
