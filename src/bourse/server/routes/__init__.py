"""Thin routes: parse, check permission, call a service, return."""

from __future__ import annotations

from fastapi import APIRouter

from bourse.server.routes import (
    agent,
    audit,
    bundles,
    cost,
    execs,
    jobs,
    nodes,
    offers,
    ports,
    projects,
    runs,
    secrets,
)

ROUTERS: tuple[APIRouter, ...] = tuple(m.router for m in (
    jobs, nodes, agent, bundles, offers, cost, execs, ports, projects, audit, secrets, runs))
