"""What the Chromium page tests share: playwright (skipped when the dev extra is missing), Debian's `chromium` and
the markers that skip a test without it."""

from __future__ import annotations

import shutil

import pytest

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
expect = playwright_api.expect
CHROMIUM = shutil.which("chromium")
CHROMIUM_MARKS = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH (make system-deps installs it)"),
]
