"""Checkers: decide whether a history is linearizable, and other properties."""
