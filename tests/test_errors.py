"""The exception tree (STYLE: one root, grouped by what the caller does next)."""

from __future__ import annotations

import pytest

from tether import errors


def test_every_public_error_derives_from_the_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.TetherError), name


def test_groups() -> None:
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.CheckpointNotFound, errors.ConfigError)
    assert issubclass(errors.ThreadBusyError, errors.ConflictError)
    assert issubclass(errors.StorageTimeout, errors.StorageUnavailable)
    assert issubclass(errors.StorageUnavailable, errors.StorageError)
    assert issubclass(errors.EncodeError, TypeError)


def test_decode_error_names_where() -> None:
    exc = errors.DecodeError("stored field 'k' no longer exists on app.Item", path="$.items[3]")
    assert str(exc) == "stored field 'k' no longer exists on app.Item at `$.items[3]`"
    exc.with_context(thread_id="t1", checkpoint_id="c1", channel="items", task_id=None)
    assert str(exc) == (
        "stored field 'k' no longer exists on app.Item at `$.items[3]` "
        "(thread_id='t1', checkpoint_id='c1', channel='items')"
    )
    # Context already known is not overwritten by an outer layer.
    exc.with_context(thread_id="other")
    assert exc.context["thread_id"] == "t1"
    with pytest.raises(errors.DecodeError, match=r"channel='items'"):
        raise exc


def test_schema_version_error_carries_both_versions() -> None:
    exc = errors.SchemaVersionError("store is at 9, this tether knows 3", found=9, supported=3)
    assert (exc.found, exc.supported) == (9, 3)
