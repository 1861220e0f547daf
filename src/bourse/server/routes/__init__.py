"""Thin routes: parse, check permission, call a service, return."""

from __future__ import annotations

from fastapi import APIRouter

from bourse.server.routes import (
    agent,
    artifacts,
    audit,
    bundles,
    clouds,
    cost,
    data,
    execs,
    gateway,
    jobs,
    metrics,
    mlflow,
    nodes,
    offers,
    ports,
    projects,
    prometheus,
    runs,
    secrets,
    services,
    tracking,
)

# the gateway first: its traffic is most of the requests, and routes are matched in order;
# then MLflow's (a training job logs a batch every few steps: matching it past seventeen
# routers cost a 1,000-point log-batch a tenth of its time, benchmarks/tracking.py)
ROUTERS: tuple[APIRouter, ...] = tuple(m.router for m in (
    gateway, mlflow, jobs, nodes, agent, bundles, offers, cost, data, execs, ports, projects,
    audit, secrets, runs, metrics, prometheus, clouds, artifacts, tracking, services))
