"""Instruction counts of encryption's cost (#17), for ``valgrind --tool=callgrind``.

    PYTHONHASHSEED=0 GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 \\
        valgrind --tool=callgrind --callgrind-out-file=OUT \\
        python -m bench._cg_encryption MODE N1 N2 G
    callgrind_annotate --threshold=100 --inclusive=yes OUT \\
        | grep -E 'functools_reduce|starmap_next'

MODE ``plain`` (tether's SqliteSaver in clear) or ``sealed`` (the same with
``encryption=``) writes the W1 chat (:mod:`bench._workloads`: a step is
``get_next_version`` for three channels, ``put`` and ``put_writes``) to a new
SQLite file for N2 steps, then takes G ``get_tuple`` of the latest checkpoint.
Steps N1 to N2 run inside one ``functools.reduce`` call and the reads inside an
``itertools.starmap``, so the inclusive instructions of ``functools_reduce``
divided by ``N2 - N1`` are a step's, the harness's own work (messages made
beforehand; only each step's few checkpoint dict copies are counted with
it), and those of ``starmap_next`` divided by G a
``get_tuple``'s. Instruction counts do not depend on the machine's load as
wall-clock times do.

Two things move a run's count by more than encryption costs and are kept
still: the cyclic garbage collector (off: a full collection at N=1,000 walks
every message, and where one falls depends on allocation counts), and
glibc's realloc, which copies a growing serializer buffer or extends it in
place depending on the heap's layout (run with
``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072``: large buffers are
mapped, and grow without copies). ``PYTHONHASHSEED=0`` fixes dict orders.
What stays random (checkpoint and snapshot ids, nonces, salts) moves an
encrypting saver's step by about +-10k instructions (0.3%) between runs; a
saver in clear repeats within a few hundred.

Results and how they were used: #17 (the encryption cost goal), in the
report of the crypt3 branch.
"""

from __future__ import annotations

import functools
import gc
import itertools
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._workloads import _advance, _checkpoint, _message
from tether import SqliteSaver
from tether.encryption import Encryption

KEY = bytes(range(32))


def main(mode: str, n1: int, n2: int, gets: int) -> None:
    gc.disable()
    with tempfile.TemporaryDirectory() as tmp:
        keys = Encryption({"bench": KEY}) if mode == "sealed" else False
        saver = SqliteSaver(Path(tmp) / "w1.db", encryption=keys)
        cfg: dict[str, Any] = {"configurable": {"thread_id": "w1", "checkpoint_ns": ""}}
        messages: list[dict[str, Any]] = []
        inputs = []
        for i in range(n2):  # the messages are made first: only the saver is counted
            messages = [*messages, _message(i)]
            values = {"messages": messages, "step": i, "status": f"step {i} done"}
            metadata = {"source": "loop", "step": i, "parents": {}}
            writes = [("messages", [_message(i)]), ("step", i)]
            inputs.append((values, metadata, writes, f"task-{i}"))
        prev: list[Any] = [None]

        def step(cfg: dict[str, Any], item: tuple[Any, ...]) -> dict[str, Any]:
            values, metadata, writes, task_id = item
            ckpt = _checkpoint(prev[0])  # a few dict copies, as w1_steps makes
            new_versions = _advance(saver, ckpt, values)
            cfg = saver.put(cfg, ckpt, metadata, new_versions)
            saver.put_writes(cfg, writes, task_id)
            prev[0] = ckpt
            return cfg

        for item in inputs[:n1]:
            cfg = step(cfg, item)
        functools.reduce(step, inputs[n1:], cfg)
        latest = {"configurable": {"thread_id": "w1", "checkpoint_ns": ""}}
        got = list(itertools.starmap(saver.get_tuple, [(latest,)] * gets))
        assert all(len(g.checkpoint["channel_values"]["messages"]) == n2 for g in got)
        saver.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
