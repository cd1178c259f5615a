"""The HTTP edge: ASGI app, auth, error mapping, streaming receipts and routes. No domain logic lives here."""

from reef.service.app import create_app

__all__ = ["create_app"]
