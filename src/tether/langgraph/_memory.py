"""The in-memory drop-in: ``langgraph.checkpoint.memory.InMemorySaver`` backed by tether's."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from tether.backends.memory import InMemorySaver as _TetherInMemorySaver
from tether.encryption import Encryption
from tether.langgraph._adapter import TetherLangGraphSaver
from tether.langgraph._serde import langgraph_serializer
from tether.lifecycle import Retention
from tether.serde.base import SerializerProtocol

__all__ = ["InMemorySaver"]


class InMemorySaver(TetherLangGraphSaver):
    """In-memory LangGraph checkpointer (tests, demos, short-lived processes).

    Unlike LangGraph's own, it is safe under concurrent use from many threads,
    deduplicates unchanged channel values and implements ``copy_thread``,
    ``delete_for_runs`` and ``prune``.

    Args:
        serde: the serializer; defaults to tether's strict serializer with
            LangGraph's value types allowed (plus ``allowlist``).
        allowlist: extra ``(module, name)`` types the graph stores.
        encryption: seal every value, write and metadata
            (:class:`~tether.encryption.Encryption` or ``{key_id: key}``);
            ``None``: ``TETHER_KEYS`` if set; ``False``: off.
        retention: the :class:`~tether.lifecycle.Retention` that ``sweep()``
            applies (every drop-in takes it; SQLite and Postgres among their
            options), and ``sweep_interval`` the seconds between background
            sweeps (``None``: off).

    Example:
        >>> from tether.langgraph import InMemorySaver
        >>> graph = builder.compile(checkpointer=InMemorySaver())  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        allowlist: Collection[tuple[str, ...]] = (),
        encryption: Encryption | Mapping[str, bytes | str] | bool | None = None,
        retention: Retention | None = None,
        sweep_interval: float | None = None,
    ) -> None:
        super().__init__(
            _TetherInMemorySaver(
                serde=serde or langgraph_serializer(allowlist),
                encryption=encryption,
                retention=retention,
                sweep_interval=sweep_interval,
            )
        )
