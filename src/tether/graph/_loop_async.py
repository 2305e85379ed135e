"""The run loop's driver (:mod:`._loop`): the I/O around :class:`~._loop.Run`'s steps.

``_loop_async.py`` is written by hand; ``_loop_sync.py`` is generated from it
by ``tools/gen_sync.py``. The one place they differ is how a node is called
(an ``if True:  # ASYNC`` block): an async run awaits async nodes and runs
sync ones in worker threads; a sync run refuses async nodes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from tether.checkpoint import RESUME
from tether.errors import ConfigError
from tether.graph._algo import Task, read_state
from tether.graph._loop import AsyncTaskRunner, Run, failure_writes, node_args, task_path
from tether.graph._persist_async import AsyncPersister
from tether.graph._types import Command, GraphInterrupt, current_task

if True:  # ASYNC
    import asyncio
    import contextvars
else:
    import time  # noqa: F401 -- the generated module's (asyncio.sleep -> time.sleep)

__all__ = ["run_async"]


async def _call_node(run: Run, task: Task) -> Any:
    """What the node's function returns."""
    if True:  # ASYNC
        if task.node.is_async:
            return await task.node.func(*node_args(run, task))
        # sync nodes run in a worker thread, with this task's context
        cv = contextvars.copy_context()
        return await asyncio.to_thread(cv.run, task.node.func, *node_args(run, task))
    else:
        return task.node.func(*node_args(run, task))


async def _call_async(run: Run, task: Task) -> list[tuple[str, Any]]:
    """Run one task (retried as its node's policy says); returns its writes."""
    if True:  # ASYNC
        pass
    else:
        if task.node.is_async:
            raise ConfigError(
                f"node {task.name!r} is async; run the graph with ainvoke()/astream()"
            )
    ctx = run.context(task)
    policy = task.node.retry
    attempt = 0
    while True:
        attempt += 1
        ctx.counter = 0
        token = current_task.set(ctx)
        try:
            if task.node.subgraph is not None:
                ret = await task.node.subgraph.ainvoke(task.input)
            else:
                ret = await _call_node(run, task)
            return run.task_writes(task, ret)
        except GraphInterrupt:
            raise
        except Exception as exc:
            if policy is None or attempt >= policy.max_attempts or not policy.should_retry(exc):
                raise
            await asyncio.sleep(policy.wait(attempt))
        finally:
            current_task.reset(token)


async def run_async(
    run: Run, input: Any, modes: Sequence[str], resume_map: Mapping[str, list[Any]] | None = None
) -> AsyncIterator[tuple[str, Any]]:
    """Run the loop; yields ``(mode, chunk)`` for the requested stream modes."""
    graph = run.graph
    lane = AsyncPersister(run.saver, run.durability)
    runner = AsyncTaskRunner()
    saver = run.saver
    try:
        if saver is not None and not run.fresh:
            saved = await saver.aget_tuple(run.user_config if run.requested_id else run.address())
            latest_id = None
            if run.requested_id is not None:
                head = await saver.aget_tuple(run.address())
                latest_id = head.checkpoint["id"] if head else None
            run.load(saved, latest_id)
        input_writes = run.prepare_input(input)
        run.stop = run.step + 1 + run.recursion_limit
        if input_writes is not None:
            await lane.put(*run.input_step(input_writes))
        else:
            run.mark_resuming()
            resumes = (
                run.resume_writes(input)
                if isinstance(input, Command)
                else run.forwarded_resume(resume_map or {})
            )
            for tid, resume in resumes:
                await lane.put_writes(
                    run.saved_config or run.address(), [(RESUME, resume)], tid, ""
                )
        while True:
            tasks = run.next_tasks(graph.interrupt_before)
            if tasks is None:
                break
            todo = [t for t in tasks if not t.done]
            config = run.saved_config or run.address()

            async def work(task: Task, config: dict[str, Any] = config) -> None:
                try:
                    writes = await _call_async(run, task)
                except Exception as exc:
                    writes = failure_writes(exc)
                    if not isinstance(exc, GraphInterrupt):
                        run.errors[task.id] = exc
                run.record(task, writes)
                await lane.put_writes(config, writes, task.id, task_path(task))

            await runner.run(work, todo)
            if "updates" in modes:
                for chunk in run.updates():
                    yield ("updates", chunk)
            put = run.finish_step(graph.interrupt_after)
            if put is None:
                break
            await lane.put(*put)
            if "values" in modes:
                yield ("values", read_state(run.program, run.channels))
            if run.interrupted_by == "after":
                break
        if run.interrupted_by and "updates" in modes:
            yield ("updates", {"__interrupt__": tuple(run.interrupts)})
    finally:
        runner.close()
        await lane.close()
    failure = run.failure
    if failure is not None:
        raise failure
