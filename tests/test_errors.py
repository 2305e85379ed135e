"""The exception tree (STYLE: one root, grouped by what the caller does next)."""

from __future__ import annotations

import pytest

from tether import errors


def test_every_public_error_derives_from_the_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type):
            assert issubclass(cls, errors.TetherError), name


def test_groups() -> None:
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.CheckpointNotFound, errors.ConfigError)
    assert issubclass(errors.ThreadBusyError, errors.ConflictError)
    assert issubclass(errors.StorageTimeout, errors.StorageUnavailable)
    assert issubclass(errors.EncodeError, TypeError)


def test_what_a_caller_retries_has_one_class_and_damage_is_not_in_it() -> None:
    """#14: StorageUnavailable was a StorageError, so "retry" had no class of its own."""
    for retry in (
        errors.ConflictError,
        errors.ThreadBusyError,
        errors.LeaseLostError,
        errors.StorageUnavailable,
        errors.StorageTimeout,
    ):
        assert issubclass(retry, errors.TransientError), retry
    for final in (
        errors.StorageError,
        errors.DecodeError,
        errors.EncodeError,
        errors.ConfigError,
        errors.SchemaVersionError,
        errors.MigrationError,
    ):
        assert not issubclass(final, errors.TransientError), final
    assert not issubclass(errors.StorageUnavailable, errors.StorageError)


def test_context_is_a_note_and_keeps_type_and_attributes() -> None:
    exc = errors.ThreadBusyError("thread 't' is leased", thread_id="t")
    assert exc.add_context("importing thread 't'") is exc
    assert exc.thread_id == "t"
    assert errors.describe(exc) == "thread 't' is leased; importing thread 't'"
    assert errors.describe(errors.ConfigError("plain")) == "plain"


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
