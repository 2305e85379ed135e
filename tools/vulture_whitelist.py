"""Names vulture (dead-code check in `make lint`) cannot see used: public API, click
commands, TypedDict fields, module __getattr__. Regenerate with
`vulture src --min-confidence 60 --make-whitelist` after checking each is really used."""

# ruff: noqa
_: object = None
__getattr__  # unused function (src/tether/__init__.py:90)
_.held_bytes  # unused property (src/tether/backends/_delta.py:269)
_.aget  # unused method (src/tether/base.py:262)
channel_values  # unused variable (src/tether/checkpoint.py:74)
channel_versions  # unused variable (src/tether/checkpoint.py:75)
versions_seen  # unused variable (src/tether/checkpoint.py:76)
updated_channels  # unused variable (src/tether/checkpoint.py:77)
delete  # unused function (src/tether/cli/_app.py:528)
import_  # unused function (src/tether/cli/_app.py:580)
export  # unused function (src/tether/cli/_app.py:698)
decision  # unused variable (src/tether/demo.py:44)
outcome  # unused variable (src/tether/demo.py:45)
_.set_entry_point  # unused method (src/tether/graph/_graph.py:142)
_.set_finish_point  # unused method (src/tether/graph/_graph.py:145)
_.stream  # unused method (src/tether/graph/_pregel_sync.py:52)
_.astream  # unused method (src/tether/graph/_pregel_async.py:50)
_.aget_state_history  # unused method (src/tether/graph/_pregel_async.py:133)
_.aupdate_state  # unused method (src/tether/graph/_pregel_async.py:154)
created_at  # unused variable (src/tether/graph/_types.py:146)
_.itersize  # unused attribute (src/tether/importer.py:440)
__getattr__  # unused function (src/tether/langgraph/__init__.py:70)
when  # unused variable (src/tether/testing/_driver.py:46)
tags  # unused variable (src/tether/testing/_driver.py:47)
_.to_json  # public API of tether.history (Status, Change): --json and tether ui
_.short  # unused variable (src/tether/ui/_reader.py: read by the thread.html template)
tool_calls  # unused variable (src/tether/ui/_values.py: read by the _macros.html template)
details  # unused variable (src/tether/ui/_values.py: read by the _macros.html template)
folded  # unused variable (src/tether/ui/_values.py: read by the _macros.html template)
_.generate_key  # public API (src/tether/encryption.py), used by docs and tests
pruned_threads  # SweepReport field (src/tether/lifecycle.py), public API and tether sweep --json
skipped  # SweepReport field (src/tether/lifecycle.py)
batches  # SweepReport field (src/tether/lifecycle.py)
freed_bytes  # SweepReport field (src/tether/lifecycle.py)
_.asweep_lock  # the async core's twin of sweep_lock (src/tether/backends/postgres/_async.py)
_.avacuum  # public API (src/tether/backends/sqlite/_saver.py)
rounds  # Sweeper counters (src/tether/_sweeper.py), read by callers and tests
busy  # Sweeper counter (src/tether/_sweeper.py)
failures  # Sweeper counter (src/tether/_sweeper.py)
