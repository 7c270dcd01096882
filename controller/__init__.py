"""Faultline's controller: test specs, the runner, campaigns and the CLI."""
