"""Reef: infrastructure for agents that keep improving from their own use."""

__version__ = "0.1.0"
