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
    tracking,
)

ROUTERS: tuple[APIRouter, ...] = tuple(m.router for m in (
    jobs, nodes, agent, bundles, offers, cost, data, execs, ports, projects, audit, secrets, runs,
    metrics, prometheus, clouds, mlflow, artifacts, tracking))
