"""``make demo``: a durable workflow on the embedded SQLite default, step by step.

    python -m tether.demo [--db tether-demo.db]

An order goes through three parallel checks (price, stock, fraud), waits for a
human's approval, then ships. The demo shows what the checkpoints buy:

1. a child process runs the graph and is killed with SIGKILL while the slow
   fraud check runs, after price and stock finished;
2. the run resumes from the last checkpoint: only the fraud check runs again
   (the saved writes of the two finished checks are replayed, not recomputed);
3. the run stops at the approval interrupt and resumes with an answer;
4. the thread's history is printed as a tree;
5. a fork from the step before the approval takes the other answer
   (``update_state(..., as_node="approve")``), and both branches are shown,
   the original one untouched.

It uses a file in the working directory and deletes only its own thread when
it starts, so re-running it is safe.
"""

from __future__ import annotations

import argparse
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from tether.backends.sqlite import SqliteSaver
from tether.graph import END, START, Command, StateGraph, interrupt

THREAD = "demo-order-1001"
CONFIG: dict[str, Any] = {"configurable": {"thread_id": THREAD}}


class Order(TypedDict, total=False):
    order: str
    checks: Annotated[list[str], operator.add]
    decision: str
    outcome: str


# --- the workflow ---------------------------------------------------------------------


def _journal(event: str) -> None:
    """Record a node execution in the side-effect journal (what was really run)."""
    path = os.environ.get("TETHER_DEMO_JOURNAL")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(event + "\n")


def receive(state: Order) -> Order:
    _journal("receive")
    return {"checks": [f"received {state['order']}"]}


def price(state: Order) -> Order:
    _journal("price")
    return {"checks": ["price ok: 3 x 19.90 EUR"]}


def stock(state: Order) -> Order:
    _journal("stock")
    return {"checks": ["stock ok: 3 in the Lyon warehouse"]}


def fraud(state: Order) -> Order:
    _journal("fraud started")
    if os.environ.get("TETHER_DEMO_SLOW_FRAUD"):
        time.sleep(60)  # the parent kills the process during this
    _journal("fraud")
    return {"checks": ["fraud ok: score 0.02"]}


def approve(state: Order) -> Order:
    answer = interrupt({"question": f"Ship {state['order']}? (yes/no)"})
    _journal(f"approve:{answer}")
    return {"decision": str(answer)}


def ship(state: Order) -> Order:
    _journal("ship")
    return {"outcome": "shipped with tracking TR-1001"}


def cancel(state: Order) -> Order:
    _journal("cancel")
    return {"outcome": "cancelled, customer refunded"}


def build() -> StateGraph:
    g = StateGraph(Order)
    for name, fn in [
        ("receive", receive),
        ("price", price),
        ("stock", stock),
        ("fraud", fraud),
        ("approve", approve),
        ("ship", ship),
        ("cancel", cancel),
    ]:
        g.add_node(name, fn)
    g.add_edge(START, "receive")
    for check in ("price", "stock", "fraud"):
        g.add_edge("receive", check)
        # the three run in one superstep, so approve runs once, after all of them
        g.add_edge(check, "approve")
    g.add_conditional_edges(
        "approve", lambda s: "ship" if s.get("decision") == "yes" else "cancel", ["ship", "cancel"]
    )
    g.add_edge("ship", END)
    g.add_edge("cancel", END)
    return g


# --- output ------------------------------------------------------------------------------


def _say(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m" if sys.stdout.isatty() else f"\n== {title}")


def _short(cid: str | None) -> str:
    return cid[-8:] if cid else "-"


def _tree(graph: Any) -> None:
    """Print the thread's checkpoints as a tree (a fork is a checkpoint with two children)."""
    snaps = list(graph.get_state_history(CONFIG))
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in snaps}
    children: dict[str | None, list[Any]] = {}
    for s in snaps:
        parent = s.parent_config["configurable"]["checkpoint_id"] if s.parent_config else None
        children.setdefault(parent if parent in by_id else None, []).append(s)
    for kids in children.values():
        kids.sort(key=lambda s: s.config["configurable"]["checkpoint_id"])

    def show(s: Any, prefix: str, last: bool) -> None:
        cid = s.config["configurable"]["checkpoint_id"]
        meta = s.metadata
        nxt = ",".join(s.next) if s.next else "(done)"
        what = s.values.get("outcome") or s.values.get("decision") or ""
        line = f"step {meta.get('step'):>2}  {meta.get('source'):<6} {_short(cid)}  next: {nxt}"
        print(prefix + ("└─ " if last else "├─ ") + line + (f"  [{what}]" if what else ""))
        kids = children.get(cid, [])
        for i, k in enumerate(kids):
            show(k, prefix + ("   " if last else "│  "), i == len(kids) - 1)

    roots = children.get(None, [])
    for i, root in enumerate(roots):
        show(root, "", i == len(roots) - 1)


def _journal_counts(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            counts[line] = counts.get(line, 0) + 1
    return counts


# --- the story ---------------------------------------------------------------------------


def _child(db: str) -> None:
    """Run in a child process: start the run; the parent kills us mid-superstep."""
    with SqliteSaver(db) as saver:
        graph = build().compile(checkpointer=saver)
        graph.invoke({"order": "order #1001 (3 desk lamps)", "checks": []}, CONFIG)


def _wait_for_two_checks(saver: SqliteSaver, child: subprocess.Popen[bytes]) -> None:
    """Block until the saved writes of two finished checks are in the database."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SystemExit(f"the child run exited early with code {child.returncode}")
        tup = saver.get_tuple(CONFIG)
        if tup is not None:
            done = {w[0] for w in tup.pending_writes or () if w[1] == "checks"}
            if len(done) >= 2:
                return
        time.sleep(0.05)
    raise SystemExit("the child run did not reach the parallel checks within 60 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="tether-demo.db", help="SQLite file (default: %(default)s)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.db)
        return 0

    db = Path(args.db).absolute()
    journal = db.with_suffix(".journal")
    journal.unlink(missing_ok=True)
    env = {**os.environ, "TETHER_DEMO_JOURNAL": str(journal)}
    os.environ["TETHER_DEMO_JOURNAL"] = str(journal)
    t0 = time.monotonic()

    with SqliteSaver(db) as saver:
        saver.delete_thread(THREAD)  # only the demo's own thread: re-running is safe
        graph = build().compile(checkpointer=saver)
        print(f"tether demo: order workflow on SQLite file {db}")
        print("receive -> (price | stock | fraud in parallel) -> approve (human) -> ship/cancel")

        _say("1. run in a child process, killed with SIGKILL mid-step")
        child = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "tether.demo", "--child", "--db", str(db)],
            env={**env, "TETHER_DEMO_SLOW_FRAUD": "1"},
        )
        _wait_for_two_checks(saver, child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        print(f"child {child.pid} killed (exit {child.returncode}) while 'fraud' was running")
        state = graph.get_state(CONFIG)
        saved = sorted(t.name for t in state.tasks if t.result is not None)
        step = (state.metadata or {}).get("step")
        print(f"last checkpoint: step {step}, next {list(state.next)}")
        print(f"tasks whose writes were saved before the kill: {saved}")

        _say("2. resume from the last checkpoint")
        out = graph.invoke(None, CONFIG)
        counts = _journal_counts(journal)
        for node in ("receive", "price", "stock", "fraud"):
            print(f"  {node:<8} finished {counts.get(node, 0)} time(s)")
        print(f"  fraud    started  {counts.get('fraud started', 0)} time(s) (once killed)")
        question = out["__interrupt__"][0].value["question"]
        print(f"the run stopped for a human: {question!r}")

        _say("3. the human answers 'yes'; the run continues")
        out = graph.invoke(Command(resume="yes"), CONFIG)
        print(f"outcome: {out['outcome']}")
        print("checks:", *[f"\n  - {c}" for c in out["checks"]])

        _say("4. the thread's history as a tree")
        _tree(graph)

        _say("5. fork: go back to the approval and answer 'no' instead")
        before = next(s for s in graph.get_state_history(CONFIG) if s.next == ("approve",))
        cid = before.config["configurable"]["checkpoint_id"]
        step = (before.metadata or {}).get("step")
        print(f"forking from step {step} ({_short(cid)}), next {before.next}")
        # as if the approve node had answered "no": a new checkpoint (source "update")
        # whose parent is the step before the approval; the old branch stays as it is
        branch = graph.update_state(before.config, {"decision": "no"}, as_node="approve")
        forked = graph.invoke(None, branch)
        print(f"new branch outcome: {forked['outcome']}")
        _tree(graph)

        _say("both branches")
        ends = [s for s in graph.get_state_history(CONFIG) if not s.next]
        for s in sorted(ends, key=lambda s: s.config["configurable"]["checkpoint_id"]):
            cid = s.config["configurable"]["checkpoint_id"]
            values = s.values
            print(f"  {_short(cid)}: decision={values['decision']!r} outcome={values['outcome']!r}")
        print(f"\ndone in {time.monotonic() - t0:.1f} s")
        print(f"inspect it with: tether history {db} {THREAD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
