"""Task files: bourse's own format, and SkyPilot and dstack files translated into it."""
