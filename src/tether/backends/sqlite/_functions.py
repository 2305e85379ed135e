"""The Python functions SQLite migrations call from SQL (a checksum SQL cannot compute).

Registered on a migrating connection only (:func:`migration_functions`), so
a migration stays one tuple of SQL statements like the others.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from tether.backends._sqlbase import write_checksum, write_checksum_v1

__all__ = ["migration_functions"]


def _or_null(fn: Callable[..., int]) -> Callable[..., int | None]:
    """``fn`` as an SQL function: NULL (never equal) for a row it cannot hash."""

    def call(*args: Any) -> int | None:
        try:
            return fn(*args)
        except (AttributeError, TypeError):
            return None

    return call


#: The Python functions the migrations call from SQL, registered on the
#: migrating connection only.
_CHECKSUMS: tuple[tuple[str, Callable[..., int | None]], ...] = (
    ("tether_write_checksum", _or_null(write_checksum)),
    ("tether_write_checksum_v1", _or_null(write_checksum_v1)),
)


def migration_functions(conn: sqlite3.Connection) -> None:
    """Give a migrating connection the functions the migrations call."""
    for name, fn in _CHECKSUMS:
        conn.create_function(name, 8, fn, deterministic=True)
