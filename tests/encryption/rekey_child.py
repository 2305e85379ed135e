"""A child process that rekeys a store slowly, to be killed mid-way (SIGKILL).

Usage: python -m tests.encryption.rekey_child STORE KID; keys from TETHER_KEYS.
Prints one line per batch, after the batch committed.
"""

from __future__ import annotations

import sys
import time

from tether.cli._stores import opened


def main() -> None:
    store, kid = sys.argv[1], sys.argv[2]

    def batch(n: int) -> None:
        print(f"batch {n}", flush=True)
        time.sleep(0.02)

    with opened(store) as st:
        st.saver.rekey(kid, batch=2, progress=batch)  # type: ignore[attr-defined]
    print("done", flush=True)


if __name__ == "__main__":
    main()
