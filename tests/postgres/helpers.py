"""Shared helpers: drive a saver through its sync or its async methods alike."""

from __future__ import annotations

from typing import Any

from tether import PostgresSaver, empty_checkpoint, make_config
from tether.checkpoint import Checkpoint, CheckpointTuple
from tether.ids import uuid6

MODES = ["sync", "async"]


async def call(mode: str, saver: PostgresSaver, name: str, *args: Any, **kwargs: Any) -> Any:
    if mode == "sync":
        return getattr(saver, name)(*args, **kwargs)
    return await getattr(saver, "a" + name)(*args, **kwargs)


async def listing(
    mode: str, saver: PostgresSaver, *args: Any, **kwargs: Any
) -> list[CheckpointTuple]:
    if mode == "sync":
        return list(saver.list(*args, **kwargs))
    return [t async for t in saver.alist(*args, **kwargs)]


def checkpoint(values: dict[str, Any], versions: dict[str, str]) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6())
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    return cp


async def chain(
    mode: str,
    saver: PostgresSaver,
    thread_id: str,
    n: int,
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """``n`` checkpoints in a row, each appending to a list channel and bumping a counter."""
    config: dict[str, Any] = make_config(thread_id, ns)
    configs = []
    messages: list[str] = []
    for i in range(n):
        messages = [*messages, f"m{i}"]
        version = f"{i + 1:032}.0"
        cp = checkpoint({"messages": messages, "step": i}, {"messages": version, "step": version})
        meta = {"step": i, **(metadata or {})}
        config = await call(
            mode, saver, "put", config, cp, meta, {"messages": version, "step": version}
        )
        configs.append(config)
    return configs


# --- schema versions and catalogs ------------------------------------------------------


def build_old_store(conn: Any, schema: str, upto: int) -> None:
    """A schema as an older tether left it: the first ``upto`` migrations, run step by step.

    This is what ``setup()`` of the tether release at version ``upto`` did on
    a new schema (the steps are append-only and kept verbatim), so tests can
    migrate a real older store without installing the old release.
    """
    from tether.backends.postgres import _schema

    q = f'"{schema}"'
    conn.execute(_schema.CREATE_SCHEMA.format(schema=q))
    conn.execute(_schema.CREATE_MIGRATIONS.format(schema=q))
    for version, migration in enumerate(_schema.MIGRATIONS[:upto], start=1):
        for statement in migration.statements:
            conn.execute(statement.format(schema=q))
        conn.execute(_schema.RECORD.format(schema=q), (version, migration.name))


CATALOG = """
SELECT 'table', c.relname, c.relkind::text, coalesce(array_to_string(c.reloptions, ','), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'p', 'i', 'S', 'v', 'm')
UNION ALL
SELECT 'column', c.relname || '.' || a.attname,
       format_type(a.atttypid, a.atttypmod) || ' collate ' || coalesce(co.collname, '-')
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || ' storage ' || a.attstorage::text,
       coalesce(pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index', c.relname, pg_get_indexdef(i.indexrelid),
       CASE WHEN i.indisvalid THEN 'valid' ELSE 'invalid' END
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(s)s
UNION ALL
SELECT 'constraint', t.relname || '.' || k.conname, pg_get_constraintdef(k.oid),
       CASE WHEN k.convalidated THEN 'validated' ELSE 'not validated' END
FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = %(s)s
UNION ALL
SELECT 'function', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       p.provolatile::text, md5(p.prosrc)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %(s)s
ORDER BY 1, 2, 3
"""


def catalog(conn: Any, schema: str, *, only: tuple[str, ...] | None = None) -> list[Any]:
    """Tables, columns (type, collation, null, storage, default), indexes, constraints
    and functions (arguments, volatility, a hash of the body).

    ``only``: keep the objects whose name (a table, index or ``table.column``)
    starts with one of these prefixes.
    """
    rows = [tuple(r) for r in conn.execute(CATALOG, {"s": schema}).fetchall()]
    if only is None:
        return rows
    return [r for r in rows if str(r[1]).startswith(only)]


def populate_delta_store(dsn: str, schema: str) -> list[Any]:
    """A store with append-delta snapshots and tails, subgraph rows and pending writes.

    Returns every tuple of ``list(None)``, as (config, checkpoint, metadata,
    parent config, pending writes).
    """
    from tether.serde import MsgpackSerializer
    from tether.testing._history import message

    with PostgresSaver.from_conn_string(dsn, schema=schema, serde=MsgpackSerializer()) as saver:
        saver.setup()
        for thread, ns in (("t1", ""), ("t1", "sub:1"), ("t2", "")):
            cfg: Any = make_config(thread, ns)
            history: list[Any] = []
            cp: dict[str, Any] = {
                "v": 4,
                "ts": "2026-01-01",
                "channel_values": {},
                "channel_versions": {},
                "versions_seen": {},
                "updated_channels": None,
            }
            for i in range(40):
                history = [*history, message(i)]
                version = saver.get_next_version(cp["channel_versions"].get("history"))
                step = saver.get_next_version(cp["channel_versions"].get("step"))
                cp = {
                    **cp,
                    "id": f"c{i:03d}-{thread}",
                    "channel_values": {"history": history, "step": i, "note": "n" * 300},
                    "channel_versions": {"history": version, "step": step, "note": "1"},
                }
                new = {"history": version, "step": step} | ({"note": "1"} if i == 0 else {})
                cfg = saver.put(cfg, cp, {"step": i, "run_id": f"r{i // 10}"}, new)  # type: ignore[arg-type]
                saver.put_writes(cfg, [("a", i), ("b", message(i))], f"task-{i % 3}", "~p")
                saver.put_writes(cfg, [("__interrupt__", {"q": i})], "task-z")
        return [
            (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
            for t in saver.list(None)
        ]


def copy_rows(conn: Any, src: str, dst: str) -> None:
    """Copy a tether store's rows into an older store's tables, with the older columns.

    ``src`` is a ``"schema".table``, ``dst`` too; the columns are ``dst``'s (an
    older version has fewer), which is what the older release wrote.
    """
    schema, table = (part.strip('"') for part in dst.split("."))
    cols = [
        r[0]
        for r in conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (schema, table),
        ).fetchall()
    ]
    names = ", ".join(cols)
    # Payloads as a release before checksums wrote them (the older stores these
    # tests build): encoding 4 (crc + bytes) as 0, 6 (crc + size + frame) as 2.
    legacy = {
        "encoding": "CASE encoding WHEN 4 THEN 0 WHEN 6 THEN 2 ELSE encoding END",
        "blob": "CASE encoding WHEN 4 THEN substring(blob from 5) "
        "WHEN 6 THEN substring(blob from 9) ELSE blob END",
    }
    values = ", ".join(legacy.get(c, c) if "encoding" in cols else c for c in cols)
    conn.execute(f"INSERT INTO {dst} ({names}) SELECT {values} FROM {src}")
