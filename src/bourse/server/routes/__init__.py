"""Thin routes: parse, check permission, call a service, return."""
