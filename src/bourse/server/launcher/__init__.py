"""Launching and ending cloud machines for waiting jobs (docs/clouds.md)."""
