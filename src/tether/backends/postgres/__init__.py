"""Postgres backend (SPEC S5.3, S5.4): the store many processes and machines share."""

from __future__ import annotations

from tether.backends.postgres._async import AsyncLease
from tether.backends.postgres._saver import PostgresSaver
from tether.backends.postgres._sync import Lease

__all__ = ["AsyncLease", "Lease", "PostgresSaver"]
