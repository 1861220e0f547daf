"""Clouds the exchange can launch machines on: one provider per cloud behind ``clouds.base``."""
