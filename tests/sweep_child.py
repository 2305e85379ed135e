"""A process that sweeps a store until it is killed (the sweep crash tests, #15).

``python tests/sweep_child.py STORE BATCH MODE``: sweeps, as of a day from now,
with a TTL (``ttl``: whole threads, BATCH a transaction) or ``keep_last=1``
(``prune``: a thread a transaction), printing ``batch`` after every committed
batch, so the parent can SIGKILL it in the middle of the next one.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tether.cli._stores import open_store
from tether.lifecycle import Retention, SweepReport


def main(store: str, batch: int, mode: str) -> None:
    st = open_store(store)
    st.saver.retention = Retention(ttl=1) if mode == "ttl" else Retention(keep_last=1)

    def moved(report: SweepReport) -> None:
        print("batch", report.batches, flush=True)

    st.saver.sweep(now=datetime.now(UTC) + timedelta(days=1), batch=batch, progress=moved)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
