"""Many rounds, many processes: two lease holders never both advance a thread (#18.7, S5.4).

Four processes take turns on one thread: take the lease (waiting), read the
latest checkpoint, sometimes dawdle, put a child of it, release. Meanwhile
this test ends the session holding the lease lock at random moments, as a
restart, a failover or an idle timeout would. Every holder whose lock was
ended keeps running its round, as a real run would. Afterwards the thread's
history must be one chain: a checkpoint with two children means two holders
both advanced the thread from it.

The control runs the same harness with fencing switched off in the children
(``TETHER_TEST_UNFENCED=1``: the lease as it was before #18.7) and must find a
fork, which shows the harness can see the failure it guards against.
"""

from __future__ import annotations

import random
import time
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver

from .conftest import fresh_schema
from .lease_harness import Fleet, history, terminate_holder, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PROCESSES = 4


def chaos(
    admin: psycopg.Connection[Any],
    schema: str,
    fleet: Fleet,
    *,
    done: Any,
    timeout: float = 240.0,
) -> int:
    """End the lease holder's session at random moments until ``done(kills)``; the kills."""
    rng = random.Random(18_7)
    kills = 0
    deadline = time.monotonic() + timeout
    while not done(kills):
        assert fleet.alive(), "a child died"
        assert time.monotonic() < deadline, f"chaos timed out: {kills} kills, {fleet.events}"
        time.sleep(rng.uniform(0.005, 0.06))
        if terminate_holder(admin, schema, "t"):
            kills += 1
    return kills


def run_fleet(
    dsn: str, admin: psycopg.Connection[Any], *, fenced: bool, done: Any
) -> tuple[Fleet, int, str]:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        saver.setup()
    env = {} if fenced else {"TETHER_TEST_UNFENCED": "1"}
    fleet = Fleet(dsn, schema, "t", PROCESSES, env=env)
    try:
        wait_for("the children to start", lambda: fleet.count("ready") == PROCESSES)
        kills = chaos(admin, schema, fleet, done=lambda kills: done(kills, fleet, schema))
        fleet.stop()
    finally:
        fleet.kill()
    return fleet, kills, schema


def test_many_holders_under_chaos_leave_one_chain(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    fleet, kills, schema = run_fleet(
        pg_dsn,
        admin,
        fenced=True,
        done=lambda kills, fleet, schema: kills >= 30 and fleet.count("put") >= 300,
    )
    h = history(admin, schema, "t")
    refused = fleet.count("lost-put") + fleet.count("lost-write")
    print(
        f"fenced: {kills} lease sessions ended, {fleet.count('put')} puts, {refused} writes "
        f"refused, {fleet.count('lost-exit')} blocks ended on a lost lease, {len(h.forks)} forks"
    )
    assert h.single_chain, f"forks: {h.forks}"
    # Every put a child saw succeed is stored, and nothing else is: a refused put
    # left no checkpoint (and, by the statement's gate, no blob or write).
    assert set(h.parents) == {cid for cid, _ in fleet.puts}
    roots = [cid for cid, parent in h.parents.items() if parent is None]
    assert len(roots) == 1


def test_the_same_chaos_without_fencing_forks_the_thread(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """The control: the lease without its fencing token lets two holders advance the thread."""

    def forked(kills: int, fleet: Fleet, schema: str) -> bool:
        if kills >= 150:
            return True  # give up: the assertion below reports it
        return kills % 5 == 0 and kills > 0 and not history(admin, schema, "t").single_chain

    fleet, kills, schema = run_fleet(pg_dsn, admin, fenced=False, done=forked)
    h = history(admin, schema, "t")
    print(
        f"unfenced: {kills} lease sessions ended, {fleet.count('put')} puts, "
        f"{len(h.forks)} forks ({sum(len(c) - 1 for c in h.forks.values())} extra children)"
    )
    assert not h.single_chain, f"no fork after {kills} kills: the harness cannot see the bug"
    assert fleet.count("lost-put") + fleet.count("lost-write") == 0  # nothing was fenced
