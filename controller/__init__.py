"""Faultline's controller: test specs, generators, the runner, campaigns and the CLI."""

__version__ = "0.1.0"
