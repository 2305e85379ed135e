"""The SQLite backend: tether's embedded default (SPEC S5.2)."""

from tether.backends.sqlite._saver import PAGE, SqliteSaver

__all__ = ["PAGE", "SqliteSaver"]
