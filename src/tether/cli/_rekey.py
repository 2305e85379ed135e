"""``tether rekey``: seal a whole store under one key of the ring (#17)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

import click

from tether.cli._common import (
    STORE_HELP,
    StoreCommand,
    boundary,
    json_option,
    out,
    print_json,
    progress_bar,
)
from tether.cli._stores import opened
from tether.errors import ConfigError

__all__ = ["rekey"]

#: Passes over the store before rows still under another key are reported: a
#: pass leaves a row a put replaced meanwhile to that put (sealed by its writer).
PASSES = 3


class _Rekeyable(Protocol):
    def rekey(
        self,
        to: str | None = None,
        *,
        batch: int = ...,
        progress: Callable[[int], None] | None = None,
    ) -> int: ...

    def rekey_pending(self, to: str | None = None) -> int: ...


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="KID",
    help="The key id to seal everything under (a key of TETHER_KEYS).",
)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    metavar="N",
    help="Rows sealed per transaction.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr. Default: when stderr is a terminal.",
)
@json_option
@boundary
def rekey(store: str, to: str, batch: int, progress: bool | None, as_json: bool) -> None:
    """Seal every value, pending write and metadata of STORE under key KID.

    The keys come from TETHER_KEYS (`kid:base64,...`): KID and every key the
    store is sealed with now. Values stored in clear (encryption turned on
    later) are sealed too. Readers and writers may go on meanwhile; give every
    writer KID as its active key first (TETHER_ACTIVE_KEY), or what they seal
    meanwhile stays under the old key. Interrupted, it is finished by running it
    again. Once it reports nothing left, the old key may leave the ring.
    """
    with opened(store) as st:
        if not hasattr(st.saver, "rekey"):
            raise ConfigError(f"{store} is not a store tether can rekey")
        saver = cast(_Rekeyable, st.saver)
        total = saver.rekey_pending(to)
        done = 0
        bar, report = progress_bar("sealing", progress, unit="rows")

        def moved(n: int) -> None:
            nonlocal done
            done += n
            if report is not None:
                report(min(done, total), total)

        left = total
        with bar:
            for _ in range(PASSES):
                if left == 0:
                    break
                if saver.rekey(to, batch=batch, progress=moved) == 0:
                    break
                left = saver.rekey_pending(to)
    if as_json:
        print_json({"key": to, "sealed": done, "left": left})
    else:
        out().print(f"sealed {done} row(s) under key {to!r}; {left} left", soft_wrap=True)
    if left:
        raise ConfigError(
            f"{left} row(s) of {store} are still not sealed under key {to!r}: a writer "
            f"still seals with another active key. Give every writer {to!r} as its active "
            "key (TETHER_ACTIVE_KEY) and run rekey again"
        )
