"""Shared fixtures. Area-specific fixtures live in each tests/<area>/conftest.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))
