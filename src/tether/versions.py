"""Channel versions (SPEC S2.5).

A channel's version increases every time the channel is written. Two styles:

* integers ``1, 2, 3`` — enough when channel values live inside each checkpoint;
* strings ``"<major:032>.<random:016>"`` — what every tether backend uses,
  because channel values are stored apart, keyed by (thread, ns, channel,
  version). Two branches forked from one checkpoint compute the same *major*
  for their next write; the random suffix keeps their blobs from overwriting
  each other. The zero padding makes string order equal numeric order of the
  major part. The format is LangGraph's, so versions cross the adapter as-is.
"""

from __future__ import annotations

import random

from tether.checkpoint import ChannelVersion
from tether.errors import ConfigError

__all__ = ["next_int_version", "next_str_version", "version_major"]


def version_major(version: ChannelVersion | None) -> int:
    """The integer part of any version (``None`` -> 0)."""
    if version is None:
        return 0
    if isinstance(version, bool):
        raise ConfigError(f"channel version must be int, float or str, got {version!r}")
    if isinstance(version, int):
        return version
    if isinstance(version, float):
        return int(version)
    if not isinstance(version, str):
        raise ConfigError(
            f"channel version must be int, float or str, got {type(version).__name__} {version!r}"
        )
    head = version.split(".", 1)[0]
    try:
        return int(head)
    except ValueError:
        raise ConfigError(
            f"channel version {version!r} is not '<major>.<suffix>' nor an integer"
        ) from None


def next_int_version(current: ChannelVersion | None) -> int:
    """``None -> 1``, ``n -> n + 1``."""
    return version_major(current) + 1


def next_str_version(current: ChannelVersion | None) -> str:
    """The next padded ``major.random`` version after ``current`` (of any style)."""
    # Called for every changed channel of every step, so the common case (a
    # string this function made) skips version_major's type checks.
    if type(current) is str:
        try:
            major = int(current.partition(".")[0])
        except ValueError:
            major = version_major(current)  # raises the ConfigError
    else:
        major = version_major(current)
    # repr(x).zfill(16) is f"{x:016}" for a float in [0, 1) (LangGraph's
    # suffix, "0.1234..."), without the format-spec parsing.
    return f"{major + 1:032}." + repr(random.random()).zfill(16)
