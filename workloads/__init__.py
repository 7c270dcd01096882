"""Workloads: bundles of client, generator, final generator and checker."""
