"""Values LangGraph's ``EncryptedSerializer`` wrote, read given its key (#17).

LangGraph's opt-in encryption (``EncryptedSerializer.from_pycryptodome_aes``)
stores ``"<type>+aes"`` and ``nonce (16) | tag (16) | ciphertext`` from
pycryptodome's AES-EAX, under one key from ``LANGGRAPH_AES_KEY`` (its text,
as bytes, 16, 24 or 32 of them). :class:`LangGraphAesReader` opens those
with pycryptodome itself (the ``langgraph-aes`` extra; nothing here is
cryptography of tether's own) and hands the plaintext to tether's strict
serializer, so ``tether import`` of an encrypted official store builds only
allowlisted types, as for any import. Exports that LangGraph's
``EncryptedSerializer`` reads are written by that class itself
(:mod:`tether.exporter`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

from tether.errors import ConfigError, DecodeError
from tether.serde.base import SerializerProtocol

__all__ = ["LangGraphAesReader", "langgraph_aes_key"]

_NONCE = 16
_TAG = 16


def langgraph_aes_key(key: bytes | str | None = None) -> bytes | None:
    """The key given, else ``LANGGRAPH_AES_KEY`` as LangGraph reads it (its text as bytes).

    Raises:
        ConfigError: not 16, 24 or 32 bytes long.
    """
    if key is None:
        env = os.environ.get("LANGGRAPH_AES_KEY")
        if not env:
            return None
        key = env
    raw = key.encode() if isinstance(key, str) else bytes(key)
    if len(raw) not in (16, 24, 32):
        raise ConfigError(
            f"the LangGraph AES key is {len(raw)} bytes; LangGraph's EncryptedSerializer "
            "uses 16, 24 or 32 (LANGGRAPH_AES_KEY)"
        )
    return raw


def _aes() -> Any:
    try:
        from Crypto.Cipher import AES
    except ImportError as exc:
        raise ConfigError(
            "values written by LangGraph's EncryptedSerializer need pycryptodome: "
            "pip install 'tether[langgraph-aes]'"
        ) from exc
    return AES


class LangGraphAesReader:
    """A serializer that also reads ``"<type>+aes"`` values (see the module doc).

    Args:
        inner: the serializer that decodes the plaintext (and encodes; this
            reader never encrypts).
        key: LangGraph's AES key; ``None``: such a value is a
            :class:`~tether.errors.DecodeError` saying which key to give.
    """

    def __init__(self, inner: SerializerProtocol, key: bytes | None) -> None:
        self.inner = inner
        self._key = key

    @property
    def allowlist(self) -> Any:
        return getattr(self.inner, "allowlist", None)

    def with_allowlist(self, extra: Collection[tuple[str, ...]]) -> LangGraphAesReader:
        widen = getattr(self.inner, "with_allowlist", None)
        inner = widen(extra) if widen is not None else self.inner
        return LangGraphAesReader(inner, self._key)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, raw = data
        base, plus, cipher = tag.partition("+")
        if not plus:
            return self.inner.loads_typed(data)
        if cipher != "aes":
            raise DecodeError(
                f"value of type {tag!r} is encrypted with cipher {cipher!r}, which tether "
                "cannot read (LangGraph's EncryptedSerializer writes 'aes')"
            )
        if self._key is None:
            raise DecodeError(
                f"value of type {tag!r} was written by LangGraph's EncryptedSerializer; "
                "set LANGGRAPH_AES_KEY to its key to read it"
            )
        aes = _aes()
        raw = bytes(raw)
        if len(raw) < _NONCE + _TAG:
            raise DecodeError(f"LangGraph-encrypted value of type {tag!r} is truncated")
        nonce, mac, body = raw[:_NONCE], raw[_NONCE : _NONCE + _TAG], raw[_NONCE + _TAG :]
        try:
            plain = aes.new(self._key, aes.MODE_EAX, nonce=nonce).decrypt_and_verify(body, mac)
        except ValueError:
            raise DecodeError(
                f"LangGraph-encrypted value of type {tag!r} does not authenticate under the "
                "given LANGGRAPH_AES_KEY: another key, or a changed value"
            ) from None
        return self.inner.loads_typed((base, plain))


def langgraph_encrypted_serializer(key: bytes) -> Any:
    """LangGraph's own ``EncryptedSerializer`` (AES-EAX) under ``key``, for exports."""
    _aes()
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    return EncryptedSerializer.from_pycryptodome_aes(key=key)
