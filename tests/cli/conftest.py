"""Fixtures for the command tests: the release content the release commands are run on."""

from tests.releases.conftest import content  # noqa: F401 - the release store's fixture, shared
