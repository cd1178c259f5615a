"""Durable record storage: the `RecordStore` contract and its SQL implementation."""

from reef.storage.base import RecordStore, ScenarioInfo
from reef.storage.group_commit import WriterStats
from reef.storage.sql import SqlRecordStore, open_record_store

__all__ = ["RecordStore", "ScenarioInfo", "SqlRecordStore", "WriterStats", "open_record_store"]
