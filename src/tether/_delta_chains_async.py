"""``prune`` and ``delete_for_runs`` through a tether saver, keeping ``DeltaChannel`` history.

The policy (which checkpoints a kept one rebuilds its delta channels from) is
:mod:`tether._delta_chains`, without I/O; these functions read the threads it
needs through the saver and then prune or delete. The LangGraph drop-in
adapter and the CLI's ``prune`` call them. ``_delta_chains_async.py`` is
written by hand; ``_delta_chains_sync.py`` is generated from it by
``tools/gen_sync.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether._delta_chains import ThreadChains, describe_conflicts, refuse_cut_runs
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.contract import check_prune, check_thread_ids

__all__ = ["adelete_runs_keeping_chains", "aprune_keeping_chains"]


async def _thread_chains(saver: BaseCheckpointSaver, thread_id: str) -> ThreadChains:
    chains = ThreadChains()
    async for tup in saver.alist({"configurable": {"thread_id": thread_id}}):
        chains.add(tup)
    return chains


async def aprune_keeping_chains(
    saver: BaseCheckpointSaver,
    thread_ids: Sequence[str],
    *,
    strategy: PruneStrategy = "keep_latest",
    keep: int = 1,
) -> dict[str, int]:
    """``saver.aprune``, keeping the checkpoints a kept one rebuilds a ``DeltaChannel`` from.

    Reads each thread once, then prunes: the threads that need no more than
    asked in one call as asked, each other one with ``keep_last`` and its own
    count. Returns how many newest checkpoints per namespace each thread
    kept (``{}`` when ``strategy`` deletes everything).
    """
    tids, n = check_thread_ids(thread_ids, bounded=False), check_prune(strategy, keep)
    if n == 0:
        await saver.aprune(tids, strategy=strategy, keep=keep)
        return {}
    counts: dict[str, int] = {}
    for tid in tids:
        counts[tid] = (await _thread_chains(saver, tid)).keep_count(n)
    as_asked = [tid for tid, count in counts.items() if count == n]
    if as_asked:
        await saver.aprune(as_asked, strategy=strategy, keep=keep)
    for tid, count in counts.items():
        if count != n:
            await saver.aprune([tid], strategy="keep_last", keep=count)
    return counts


async def adelete_runs_keeping_chains(saver: BaseCheckpointSaver, run_ids: Sequence[str]) -> None:
    """``saver.adelete_for_runs``, unless a checkpoint that stays needs one of the runs'.

    Raises:
        ConfigError: a remaining checkpoint rebuilds a ``DeltaChannel`` from
            the writes or snapshot of a checkpoint of these runs (nothing is
            deleted then).
    """
    runs = check_thread_ids(run_ids, "run_ids", bounded=False)
    if runs:
        wanted = set(runs)
        threads: dict[str, None] = {}
        for run in wanted:
            async for tup in saver.alist(None, filter={"run_id": run}):
                threads[tup.config["configurable"]["thread_id"]] = None
        problems = []
        for tid in threads:
            cut = (await _thread_chains(saver, tid)).delete_conflicts(wanted)
            if cut:
                problems.append(describe_conflicts(tid, cut))
        refuse_cut_runs(runs, problems)
    await saver.adelete_for_runs(run_ids)
