"""Fixtures of the encryption tests (#17): keys, and the stores sealed values live in."""

from __future__ import annotations

from ..postgres.conftest import pg_dsn

__all__ = ["pg_dsn"]
