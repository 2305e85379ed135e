"""Wrote ``sealed_heads_v2.db`` with tether as of commit bf773bb, whose encrypting
SQLite saver sealed each small value on its own in the checkpoint head (``["base64"]``)
and the metadata alone (format 2), before a checkpoint's envelope (format 3).

Kept to show how the file was made; run with that tether on the path::

    python make_sealed_heads_v2.py sealed_heads_v2.db
"""

import base64
import sys

from tether import SqliteSaver
from tether.checkpoint import empty_checkpoint
from tether.encryption import Encryption

KEY = base64.b64decode("dGV0aGVyLWZpeHR1cmUta2V5LW5vdC1hLXNlY3JldCE=")
path = sys.argv[1]
s = SqliteSaver(path, encryption=Encryption({"old": KEY}), compress_threshold=64)
cfg = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
prev = None
for i in range(3):
    if prev is None:
        ck = empty_checkpoint()
    else:
        ck = {**prev, "channel_versions": dict(prev["channel_versions"])}
    ck["id"] = f"1f0d0000-0000-6000-8000-00000000000{i}"
    messages = [{"text": "hello " * 30, "n": j} for j in range(i + 1)]
    vals = {"count": i, "status": f"step {i}", "messages": messages}
    nv = {}
    for c in ["count", "status", "messages"] if i != 2 else ["count", "messages"]:
        v = s.get_next_version(ck["channel_versions"].get(c), None)
        ck["channel_versions"][c] = v
        nv[c] = v
    ck["channel_values"] = vals
    cfg = s.put(cfg, ck, {"source": "loop", "step": i, "parents": {}, "user": "alice"}, nv)
    s.put_writes(cfg, [("count", i + 1), ("messages", ["w"])], f"task-{i}")
    prev = ck
s.close()
