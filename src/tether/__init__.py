"""tether: durable checkpoints for stateful graph and agent workflows.

Every step of a run is saved as a checkpoint, so a run can stop and resume
where it was, be rewound to any past step, and be forked into a new branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.backends.memory import InMemorySaver
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.checkpoint import (
    MAX_NAME_BYTES,
    MAX_NS_BYTES,
    Address,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    copy_checkpoint,
    empty_checkpoint,
    make_config,
)
from tether.errors import (
    CheckpointNotFound,
    ConfigError,
    ConflictError,
    DecodeError,
    EncodeError,
    LeaseLostError,
    MigrationError,
    SchemaVersionError,
    StorageError,
    StorageTimeout,
    StorageUnavailable,
    TetherError,
    ThreadBusyError,
)
from tether.ids import uuid6
from tether.serde import MsgpackSerializer

if TYPE_CHECKING:
    from tether.backends.postgres import PostgresSaver
    from tether.backends.sqlite import SqliteSaver

__version__ = "0.1.0.dev0"

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_NS_BYTES",
    "Address",
    "BaseCheckpointSaver",
    "Checkpoint",
    "CheckpointMetadata",
    "CheckpointNotFound",
    "CheckpointTuple",
    "ConfigError",
    "ConflictError",
    "DecodeError",
    "EncodeError",
    "InMemorySaver",
    "LeaseLostError",
    "MigrationError",
    "MsgpackSerializer",
    "PendingWrite",
    "PostgresSaver",
    "PruneStrategy",
    "SchemaVersionError",
    "SqliteSaver",
    "StorageError",
    "StorageTimeout",
    "StorageUnavailable",
    "TetherError",
    "ThreadBusyError",
    "copy_checkpoint",
    "empty_checkpoint",
    "make_config",
    "uuid6",
]

_LAZY = {
    # Imported on first use: Postgres needs the optional `postgres` extra, and
    # neither backend should cost import time to users of the other.
    "SqliteSaver": "tether.backends.sqlite",
    "PostgresSaver": "tether.backends.postgres",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        extra = "postgres" if name == "PostgresSaver" else None
        hint = f"; install it with `pip install 'tether[{extra}]'`" if extra else ""
        raise ImportError(f"tether.{name} is not available: {exc}{hint}") from exc
    value = getattr(mod, name)
    globals()[name] = value
    return value
