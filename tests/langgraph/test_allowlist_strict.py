"""A LangGraph graph whose state holds the user's own types (issue #13.4).

With ``LANGGRAPH_STRICT_MSGPACK=true`` LangGraph hands the graph's schema types
to the checkpointer's ``with_allowlist`` when it compiles; the drop-in answers
with a copy whose serializer allows them, so the graph runs and reads its
history. Without strict mode the same graph is refused at its first write,
with every type named and the fix spelled out. Each run is a fresh process:
LangGraph reads the variable when it is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MODELS = """
import dataclasses
import enum

import pydantic


class Status(enum.Enum):
    OPEN = "open"
    SHIPPED = "shipped"


class Order(pydantic.BaseModel):
    sku: str
    qty: int
    status: Status = Status.OPEN


@dataclasses.dataclass
class Line:
    sku: str
    price: float
"""

GRAPH = """
import json, operator, sys
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from shop_models import Line, Order, Status
from tether.errors import DecodeError, EncodeError
from tether.langgraph import InMemorySaver


class State(TypedDict, total=False):
    order: Order
    lines: Annotated[list[Line], operator.add]


def price(state: State) -> State:
    return {"lines": [Line(state["order"].sku, 9.5)]}


def approve(state: State) -> State:
    answer = interrupt({"question": "ship?"})
    order = state["order"].model_copy(update={"status": Status(answer)})
    return {"order": order, "lines": [Line("fee", 1.0)]}


builder = StateGraph(State)
builder.add_node("price", price)
builder.add_node("approve", approve)
builder.add_edge(START, "price")
builder.add_edge("price", "approve")
builder.add_edge("approve", END)

out = {}
saver = InMemorySaver()
config = {"configurable": {"thread_id": "order-1"}}
graph = builder.compile(checkpointer=saver)
try:
    graph.invoke({"order": Order(sku="lamp", qty=2)}, config)
except EncodeError as exc:
    out["refused"] = str(exc)
else:
    out["interrupted"] = [i.value for i in graph.get_state(config).interrupts]
    final = graph.invoke(Command(resume="shipped"), config)
    out["final"] = {"status": final["order"].status.value, "lines": [l.sku for l in final["lines"]]}
    history = list(graph.get_state_history(config))
    out["history"] = len(history)
    out["types"] = sorted(
        {type(v).__name__ for s in history for v in [s.values.get("order")] if v is not None}
        | {type(l).__name__ for s in history for l in s.values.get("lines", [])}
    )
    # the allowlist lives on the compiled graph's copy; the saver itself stays strict
    try:
        saver.get_tuple(config)
    except DecodeError as exc:
        out["plain_saver"] = exc.type_name
print(json.dumps(out))
"""


def run(tmp_path: Path, *, strict: bool) -> dict[str, object]:
    (tmp_path / "shop_models.py").write_text(textwrap.dedent(MODELS))
    env = {
        **os.environ,
        "LANGGRAPH_STRICT_MSGPACK": "true" if strict else "false",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
    }
    env.pop("TETHER_ALLOWLIST", None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(GRAPH)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_strict_mode_hands_the_schema_types_to_the_drop_in(tmp_path: Path) -> None:
    out = run(tmp_path, strict=True)
    assert out == {
        "interrupted": [{"question": "ship?"}],
        "final": {"status": "shipped", "lines": ["lamp", "fee"]},
        "history": 4,
        "types": ["Line", "Order"],
        # the innermost refused type is reported: Status, inside an Order
        "plain_saver": "shop_models.Status",
    }


def test_without_strict_mode_the_first_write_names_every_type(tmp_path: Path) -> None:
    out = run(tmp_path, strict=False)
    refused = out["refused"]
    assert isinstance(refused, str)
    # the first write is the graph's input, {"order": Order(...)}
    assert "- shop_models:Order at `$.order`: not in the allowlist" in refused
    assert "- shop_models:Status at `$.order.status`: not in the allowlist" in refused
    assert "allowlist=[('shop_models', 'Order'), ('shop_models', 'Status')]" in refused
    assert "TETHER_ALLOWLIST=shop_models:Order,shop_models:Status" in refused


@pytest.mark.parametrize("how", ["env", "argument"])
def test_the_suggested_fixes_work(tmp_path: Path, how: str) -> None:
    """TETHER_ALLOWLIST in the environment, or allowlist= on the drop-in."""
    (tmp_path / "shop_models.py").write_text(textwrap.dedent(MODELS))
    script = textwrap.dedent(GRAPH)
    env = {
        **os.environ,
        "LANGGRAPH_STRICT_MSGPACK": "false",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
    }
    if how == "env":
        env["TETHER_ALLOWLIST"] = "shop_models:*"
    else:
        script = script.replace(
            "saver = InMemorySaver()",
            "saver = InMemorySaver(allowlist=[('shop_models', 'Order'), "
            "('shop_models', 'Status'), ('shop_models', 'Line')])",
        )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["final"] == {"status": "shipped", "lines": ["lamp", "fee"]}
    assert "plain_saver" not in out  # the saver itself allows them here
