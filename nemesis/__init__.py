"""Faults and their schedules; every fault knows how to heal itself."""
