"""Adapter definitions (package data): one JSON file per agent, read by `reef.harness.adapters_catalog`."""
