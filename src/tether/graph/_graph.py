"""``StateGraph``: the builder users write, compiled into channels and triggers.

Compiling turns the builder into a :class:`~tether.graph._algo.Program`:

* one channel per state key (``LastValue``, or ``Reducer`` for annotated keys);
* ``__start__`` (the input), ``__pregel_tasks`` (``Send`` packets) and one
  ``branch:to:<node>`` trigger per node;
* ``add_edge([a, b], c)`` adds a ``join:a+b:c`` barrier that ``a`` and ``b``
  write their names to; ``c`` also triggers on it once it holds both;
* every node triggers on its ``branch:to`` channel; its *writers* are its
  outgoing edges: a fixed edge writes the target's trigger, a conditional edge
  calls the routing function on the state after the node's update and writes
  the triggers (or ``Send`` packets) it names.

``START`` is a node too: it reads ``__start__``, writes the input into the
state keys and fires the edges from ``START``. That is why a new thread's
first checkpoint (``source="input"``, step -1) holds only ``__start__`` and the
state appears in the step 0 checkpoint.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigError
from tether.graph._algo import TASKS, NodeSpec, Program, Writer, branch_channel
from tether.graph._channels import Barrier, Channel, Ephemeral, Topic
from tether.graph._state import StateSchema
from tether.graph._types import END, START, RetryPolicy, Send

if TYPE_CHECKING:
    from tether.base import BaseCheckpointSaver
    from tether.graph._pregel import CompiledStateGraph

__all__ = ["StateGraph"]


def _route(path: Callable[[Any], Any], path_map: Mapping[Hashable, str] | None) -> Writer:
    def writer(state: Any, _ret: Any) -> list[tuple[str, Any]]:
        result = path(state)
        items = result if isinstance(result, (list, tuple)) else [result]
        out: list[tuple[str, Any]] = []
        for item in items:
            if isinstance(item, Send):
                out.append((TASKS, item))
                continue
            target = path_map[item] if path_map is not None else item
            if target != END:
                out.append((branch_channel(target), None))
        return out

    return writer


def _fixed(target: str) -> Writer:
    write = [(branch_channel(target), None)]
    return lambda _state, _ret: list(write)


class StateGraph:
    """A graph whose nodes read and update a shared state.

    Args:
        state_schema: a TypedDict, dataclass or Pydantic model; fields annotated
            ``Annotated[T, reducer]`` combine writes with ``reducer``.

    Example::

        class State(TypedDict):
            items: Annotated[list[str], operator.add]

        g = StateGraph(State)
        g.add_node("a", lambda s: {"items": ["a"]})
        g.add_edge(START, "a")
        app = g.compile(checkpointer=tether.InMemorySaver())
        app.invoke({"items": []}, {"configurable": {"thread_id": "1"}})
    """

    def __init__(self, state_schema: Any) -> None:
        self.schema = StateSchema(state_schema)
        self.nodes: dict[str, tuple[Any, RetryPolicy | None]] = {}
        self.edges: list[tuple[str, str]] = []
        self.waiting_edges: list[tuple[tuple[str, ...], str]] = []
        self.branches: list[tuple[str, Callable[[Any], Any], Mapping[Hashable, str] | None]] = []

    def add_node(
        self,
        node: str | Callable[..., Any],
        action: Callable[..., Any] | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        retry: RetryPolicy | None = None,
    ) -> StateGraph:
        """Add a node: ``add_node("name", fn)`` or ``add_node(fn)`` (named after ``fn``).

        ``fn`` takes the state (and, if it has a parameter named ``config``,
        the run's config with ``thread_id``, ``checkpoint_ns``, ``task_id``,
        ``step`` and ``node`` under ``configurable``) and returns a partial update (dict), a
        :class:`~tether.graph.Command` or ``None``; it may be ``async``. A
        compiled graph is accepted as ``fn`` and runs as a subgraph.
        """
        if action is None:
            if isinstance(node, str):
                raise ConfigError(f"add_node({node!r}) needs the node's function")
            action, node = node, getattr(node, "__name__", None) or repr(node)
        assert isinstance(node, str)
        if node in (START, END) or node in self.nodes:
            raise ConfigError(f"node name {node!r} is reserved or already used")
        if any(c in node for c in "|:"):
            raise ConfigError(f"node name {node!r} may not contain '|' or ':'")
        self.nodes[node] = (action, retry_policy or retry)
        return self

    def add_edge(self, start: str | Sequence[str], end: str) -> StateGraph:
        """Run ``end`` after ``start``; with a list, after *all* of them have run."""
        starts = [start] if isinstance(start, str) else list(start)
        if END in starts or end == START or not starts:
            raise ConfigError(f"edge {start!r} -> {end!r} runs the wrong way")
        if isinstance(start, str):
            self.edges.append((start, end))
        else:
            self.waiting_edges.append((tuple(starts), end))
        return self

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[[Any], Any],
        path_map: Mapping[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        """After ``source``, run the node(s) ``path(state)`` names (or the ``Send``s it returns)."""
        mapping: Mapping[Hashable, str] | None
        if path_map is None or isinstance(path_map, Mapping):
            mapping = path_map
        else:
            mapping = {name: name for name in path_map}
        self.branches.append((source, path, mapping))
        return self

    def set_entry_point(self, node: str) -> StateGraph:
        return self.add_edge(START, node)

    def set_finish_point(self, node: str) -> StateGraph:
        return self.add_edge(node, END)

    def _validate(self) -> None:
        known = set(self.nodes) | {START, END}
        for sources, b in self.waiting_edges:
            for name in (*sources, b):
                if name not in known:
                    raise ConfigError(f"edge {sources!r} -> {b!r} names unknown node {name!r}")
        for a, b in self.edges:
            for name in (a, b):
                if name not in known:
                    raise ConfigError(f"edge {a!r} -> {b!r} names unknown node {name!r}")
        for source, _, mapping in self.branches:
            if source not in known:
                raise ConfigError(f"conditional edge from unknown node {source!r}")
            for target in (mapping or {}).values():
                if target not in known:
                    raise ConfigError(f"conditional edge from {source!r} to unknown {target!r}")
        if not any(a == START for a, _ in self.edges) and not any(
            s == START for s, _, _ in self.branches
        ):
            raise ConfigError("the graph has no entry point; add_edge(START, 'first_node')")

    def compile(
        self,
        checkpointer: BaseCheckpointSaver | None = None,
        *,
        interrupt_before: Sequence[str] | str = (),
        interrupt_after: Sequence[str] | str = (),
        name: str = "graph",
    ) -> CompiledStateGraph:
        """The runnable graph. Without a checkpointer it runs in memory only,
        or, used as a node, inside its parent's checkpointer."""
        from tether.graph._pregel import CompiledStateGraph

        self._validate()
        schema = self.schema
        factories: dict[str, Callable[[], Channel]] = {}
        for key in schema.keys:
            factories[key] = _channel_factory(schema, key)
        factories[START] = lambda: Ephemeral(START)
        factories[TASKS] = lambda: Topic(TASKS)

        def start(value: Any) -> Any:
            return value

        nodes: dict[str, NodeSpec] = {START: NodeSpec(START, start, [START], input_channel=START)}
        for name_, (action, retry) in self.nodes.items():
            trigger = branch_channel(name_)
            factories[trigger] = _ephemeral(trigger)
            sub = action if isinstance(action, CompiledStateGraph) else None
            nodes[name_] = NodeSpec(
                name_,
                action,
                [trigger],
                is_async=sub is None and inspect.iscoroutinefunction(action),
                retry=retry,
                subgraph=sub,
                wants_config=sub is None and _wants_config(action),
            )
        for a, b in self.edges:
            if b != END:
                nodes[a].writers.append(_fixed(b))
        for source, path, mapping in self.branches:
            nodes[source].writers.append(_route(path, mapping))
        for sources, target in self.waiting_edges:
            join = f"join:{'+'.join(sources)}:{target}"
            factories[join] = _barrier(join, sources)
            if target != END:
                nodes[target].triggers.append(join)
            for source in sources:
                nodes[source].writers.append(_named(join, source))
        trigger_to_nodes: dict[str, list[str]] = {}
        for spec in nodes.values():
            for ch in spec.triggers:
                trigger_to_nodes.setdefault(ch, []).append(spec.name)
        program = Program(schema, factories, nodes, trigger_to_nodes)
        before = [interrupt_before] if isinstance(interrupt_before, str) else interrupt_before
        after = [interrupt_after] if isinstance(interrupt_after, str) else interrupt_after
        return CompiledStateGraph(
            program,
            checkpointer,
            interrupt_before=list(before),
            interrupt_after=list(after),
            name=name,
        )


def _channel_factory(schema: StateSchema, key: str) -> Callable[[], Channel]:
    return lambda: schema.channel(key)


def _wants_config(fn: Callable[..., Any]) -> bool:
    try:
        return "config" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _barrier(name: str, sources: Sequence[str]) -> Callable[[], Channel]:
    return lambda: Barrier(name, sources)


def _named(channel: str, source: str) -> Writer:
    return lambda _state, _ret: [(channel, source)]


def _ephemeral(name: str) -> Callable[[], Channel]:
    return lambda: Ephemeral(name)
