"""Stored payloads: how a serialized value is kept in a blob or write row, and checked.

A stored value is ``(type, encoding, payload)``: ``type`` is the serializer's
tag and ``encoding`` says how ``payload`` was made from the serializer's
bytes. Every backend that keeps bytes outside the process (SQLite, Postgres)
goes through :class:`BlobCodec`; nothing here does I/O.

Encodings (the low two bits say the compression, bit 4 a checksum header,
bit 8 encryption):

=====  =========================================  ===========================
code   payload                                    written
=====  =========================================  ===========================
0      the serializer's bytes                      by releases before #18
1      zlib (RFC 1950) of them                     read only
2      one zstd frame (RFC 8878) of them           by releases before #18
4      ``crc`` + the serializer's bytes            small or incompressible values
6      ``crc`` + ``size`` + one zstd frame         values that compress
12     ``crc`` + sealed(the serializer's bytes)    4, encrypted (#17)
14     ``crc`` + sealed(``size`` + zstd frame)     6, encrypted (#17)
=====  =========================================  ===========================

Encrypted payloads (:mod:`tether.encryption`) are sealed after compression;
``crc`` covers the sealed bytes, so random damage is still a StorageError
("damaged") and only bytes that pass it reach the cipher, whose tag then
catches deliberate changes and ciphertexts moved from another row (the
``place`` every encrypted call is given, with the value's type and encoding,
is the associated data).

``crc`` is the low 32 bits of xxh3-64 over everything after it, little-endian;
``size`` is the uncompressed length (4 bytes, little-endian). A reader
verifies ``crc`` before it decodes or decompresses anything, so a flipped,
lost or added byte anywhere in a payload is a :class:`~tether.errors.StorageError`
naming the row, never a silently different value (a damaged length byte used
to turn a 3-message history into 1 message). xxh3 was chosen for speed: it
hashes 500 KB in ~30 us where ``zlib.crc32`` takes ~160 us; 32 bits miss one
random damage in four billion, at 4 bytes per value.

Decompression is bounded: ``size`` (or a legacy frame's declared content size)
must be at most ``max_value_size`` and the frame must declare exactly
``size`` bytes, so a tampered 64 KB frame that declares 2 GiB is refused
before anything is allocated (zstd allocates what a frame declares). Writes
refuse values over ``max_value_size`` too, so nothing is stored that this
saver would refuse to read. Codes 3, 5, 7-11, 13 and 15 and above are
reserved: a reader meeting one raises StorageError saying to upgrade.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import xxhash
import zstandard

from tether.backends._delta import ChannelPlan
from tether.checkpoint import Address
from tether.contract import EMPTY, EMPTY_TAG, decode_value
from tether.encryption import Encryption, key_id_of
from tether.errors import ConfigError, DecodeError, EncodeError, StorageError
from tether.serde.base import SerializerProtocol

__all__ = [
    "CHECKSUM",
    "DEFAULT_MAX_VALUE_SIZE",
    "ENCODING_PLAIN",
    "ENCODING_ZLIB",
    "ENCODING_ZSTD",
    "ENCRYPTED",
    "BlobCodec",
    "EncodedValue",
    "checksum",
    "sealed_payload",
    "where",
]

#: The serializer's bytes, untouched (no longer written: see CHECKSUM).
ENCODING_PLAIN = 0
#: The serializer's bytes, compressed with zlib (RFC 1950); still read, no longer written.
ENCODING_ZLIB = 1
#: The serializer's bytes, compressed with zstd (RFC 8878), one frame with its size.
ENCODING_ZSTD = 2
#: Flag: the payload starts with a checksum (and, compressed, the uncompressed size).
CHECKSUM = 4
#: Flag: the payload after the checksum is sealed (:mod:`tether.encryption`).
ENCRYPTED = 8
_COMPRESSION = 3  # the bits that say how the body is compressed

#: The largest value stored or read back by default (serialized, uncompressed): 1 GiB.
DEFAULT_MAX_VALUE_SIZE = 1 << 30
_SIZE_LIMIT = (1 << 32) - 1  # `size` is 4 bytes

EncodedValue: TypeAlias = tuple[str, int, bytes]
"""``(type, encoding, payload)`` as stored in a blob or write row."""

_zstd = threading.local()  # zstd contexts are not thread-safe: one pair per thread


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    key = f"c{level}"
    c: zstandard.ZstdCompressor | None = getattr(_zstd, key, None)
    if c is None:
        c = zstandard.ZstdCompressor(level=level)
        setattr(_zstd, key, c)
    return c


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    d: zstandard.ZstdDecompressor | None = getattr(_zstd, "d", None)
    if d is None:
        d = _zstd.d = zstandard.ZstdDecompressor()
    return d


_xxh3 = xxhash.xxh3_64_intdigest
_U32 = struct.Struct("<I")  # the checksum and the size fields: 4 bytes, little-endian
_pack_u32 = _U32.pack
_read_u32 = _U32.unpack_from


def checksum(data: bytes | memoryview) -> int:
    """The 32-bit checksum of a payload body: the low half of xxh3-64."""
    return _xxh3(data) & 0xFFFFFFFF


def where(address: Address, channel: str | None = None, task_id: str | None = None) -> str:
    """``of thread 't', checkpoint '1f0…', channel 'messages'``: a stored value's row."""
    parts = [f"thread {address.thread_id!r}"]
    if address.checkpoint_ns:
        parts.append(f"ns {address.checkpoint_ns!r}")
    if address.checkpoint_id:
        parts.append(f"checkpoint {address.checkpoint_id!r}")
    if channel is not None:
        parts.append(f"channel {channel!r}")
    if task_id is not None:
        parts.append(f"task {task_id!r}")
    return "of " + ", ".join(parts)


class _Damaged(Exception):
    """Why a payload cannot be read; :meth:`BlobCodec.decode_bytes` adds the row."""


@dataclass(frozen=True, slots=True)
class BlobCodec:
    """Turns serialized values into stored payloads and back (see the module doc).

    Args:
        compress_threshold: payloads of at least this many bytes are stored
            zstd-compressed (when that is smaller); ``None`` stores every
            payload uncompressed.
        compress_level: zstd level. 3 (zstd's own default) by default: on
            chat histories and tool output it decompresses 13-45% faster than
            level 1, stores 5-15% fewer bytes and compresses as fast (within
            +-5%; 8-15% slower only on data that barely compresses), measured
            in docs/architecture.md.
        max_value_size: the largest serialized value written or read back, in
            bytes; a bigger one is an :class:`~tether.errors.EncodeError` on
            write and a :class:`~tether.errors.StorageError` on read.
        crypt: the keyring that seals every value written and opens encrypted
            ones; every call that encodes or decodes then needs the value's
            ``place`` (:func:`~tether.encryption.value_place`, ...).
    """

    compress_threshold: int | None = None
    compress_level: int = 3
    max_value_size: int = DEFAULT_MAX_VALUE_SIZE
    #: seals every value written (``place``: see :mod:`tether.encryption`); ``None``: clear
    crypt: Encryption | None = None

    def __post_init__(self) -> None:
        t = self.compress_threshold
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ConfigError(f"compress_threshold must be a positive int or None, got {t!r}")
        if not 1 <= self.compress_level <= 19:
            raise ConfigError(f"compress_level must be 1..19, got {self.compress_level!r}")
        m = self.max_value_size
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= _SIZE_LIMIT:
            raise ConfigError(
                f"max_value_size must be a number of bytes from 1 to {_SIZE_LIMIT:,}, got {m!r}"
            )

    # --- writing ------------------------------------------------------------------

    def encode(
        self, serde: SerializerProtocol, value: Any, place: bytes | None = None
    ) -> EncodedValue:
        """Serialize ``value`` (``EMPTY`` marks a cleared channel) and encode it."""
        if value is EMPTY:
            if self.crypt is not None:  # sealed too: a clear "cleared" could be slipped in
                return self.encode_bytes(EMPTY_TAG, b"", place)
            return EMPTY_TAG, ENCODING_PLAIN, b""
        tag, data = serde.dumps_typed(value)
        return self.encode_bytes(tag, data, place)

    def encode_plan(
        self, plan: ChannelPlan, place: Callable[[str, str | None], bytes] | None = None
    ) -> list[tuple[str, str, int, bytes, str | None]]:
        """The rows of an append plan as ``(version, type, encoding, payload, base)``.

        ``place(version, base)``: the place of each row, when values are sealed.
        """
        out = []
        for row in plan.rows:
            at = place(row.version, row.base) if place is not None else None
            tag, encoding, payload = self.encode_bytes(row.tag, row.data, at)
            out.append((row.version, tag, encoding, payload, row.base))
        return out

    def encode_bytes(self, tag: str, data: bytes, place: bytes | None = None) -> EncodedValue:
        """Encode already-serialized bytes, with a checksum; compressed when that saves space.

        With ``crypt``, the body is sealed (after compression), bound to
        ``place``, ``tag`` and the encoding.

        Raises:
            EncodeError: ``data`` is larger than ``max_value_size``.
        """
        if self.crypt is not None:
            return self._sealed(tag, data, place)
        return self._clear(tag, data)

    def _clear(self, tag: str, data: bytes) -> EncodedValue:
        encoding, body = self._frame(tag, data)
        return tag, encoding, _pack_u32(_xxh3(body) & 0xFFFFFFFF) + body

    def _frame(self, tag: str, data: bytes) -> tuple[int, bytes]:
        """``(encoding, body)``: the bytes the checksum covers, compressed when that saves."""
        size = len(data)
        if size > self.max_value_size:
            raise EncodeError(
                f"a {tag} value of {size:,} bytes (serialized) is larger than max_value_size "
                f"({self.max_value_size:,} bytes); store large data elsewhere and keep a "
                "reference in the state, or raise max_value_size"
            )
        t = self.compress_threshold
        if t is not None and size >= t:
            frame = _zstd_compressor(self.compress_level).compress(data)
            if len(frame) + 4 < size:
                return ENCODING_ZSTD | CHECKSUM, _pack_u32(size) + frame
        return CHECKSUM, data

    def _sealed(self, tag: str, data: bytes, place: bytes | None) -> EncodedValue:
        crypt = self.crypt
        assert crypt is not None
        encoding, bound, body = self.to_seal(tag, data, place)
        return tag, encoding, sealed_payload(crypt.seal(bound, body))

    def to_seal(self, tag: str, data: bytes, place: bytes | None) -> tuple[int, bytes, bytes]:
        """The first half of a sealed :meth:`encode_bytes`: ``(encoding, associated data,
        body)``. The caller seals the body (:meth:`Encryption.seal_many
        <tether.encryption.Encryption.seal_many>`, with the other values of its put)
        and stores :func:`sealed_payload` of the seal.

        Raises:
            EncodeError: no place, or ``data`` is larger than ``max_value_size``.
        """
        if place is None:
            raise EncodeError(f"a {tag} value to encrypt was given no place to bind it to")
        encoding, body = self._frame(tag, data)
        encoding |= ENCRYPTED
        return encoding, _bind(place, tag, encoding), body

    def encode_many(
        self, serde: SerializerProtocol, items: Sequence[tuple[Any, bytes | None]]
    ) -> list[EncodedValue]:
        """:meth:`encode` of each ``(value, place)``; sealed ones are sealed together
        (:meth:`Encryption.seal_many <tether.encryption.Encryption.seal_many>`)."""
        crypt = self.crypt
        if crypt is None:
            return [self.encode(serde, value) for value, _ in items]
        parts = []
        for value, place in items:
            tag, data = (EMPTY_TAG, b"") if value is EMPTY else serde.dumps_typed(value)
            parts.append((tag, *self.to_seal(tag, data, place)))
        sealed = crypt.seal_many([(bound, body) for _, _, bound, body in parts])
        return [(p[0], p[1], sealed_payload(s)) for p, s in zip(parts, sealed, strict=True)]

    def rewrap(
        self,
        tag: str,
        encoding: int,
        payload: bytes | None,
        old_place: bytes,
        new_place: bytes,
        *,
        where: str | Callable[[], str] = "",
    ) -> tuple[int, bytes]:
        """A stored value (clear or sealed under any key of the ring) as ``crypt`` stores it
        at ``new_place``: ``(encoding, payload)``. For ``copy_thread`` (a new thread in the
        place) and ``tether rekey`` (the active key).

        Raises:
            StorageError, DecodeError: as :meth:`decode_bytes`.
        """
        data = self.decode_bytes(encoding, payload, where=where, tag=tag, place=old_place)
        _, new_encoding, new_payload = self.encode_bytes(tag, data, new_place)
        return new_encoding, new_payload

    # --- reading ------------------------------------------------------------------

    def clear_body(self, encoding: int, payload: Any) -> bytes | None:
        """The serializer's bytes of an uncompressed payload in clear that checks out,
        or ``None``: the read fast path, which raises nothing and names no row.

        A checksummed payload (encoding 4, what every value and write is stored as
        now) whose checksum matches and whose size is within ``max_value_size``,
        or a plain one (encoding 0, older rows). ``None`` for anything else (a
        compressed or sealed payload, a damaged one, a column of another type):
        the caller then takes :meth:`decode_bytes`, which reads it or says why not.
        """
        if self.crypt is not None or type(payload) is not bytes:
            return None
        if encoding == CHECKSUM:
            body = payload[4:]
            if (
                len(payload) >= 4
                and len(body) <= self.max_value_size
                and checksum(body) == _read_u32(payload)[0]
            ):
                return body
            return None
        return payload if encoding == ENCODING_PLAIN else None

    def decode_bytes(
        self,
        encoding: int,
        payload: bytes | None,
        *,
        where: str | Callable[[], str] = "",
        tag: str = "",
        place: bytes | None = None,
    ) -> bytes:
        """The serializer's bytes back from a stored payload.

        Args:
            where: the row, for messages (a callable is called only on error).
            tag, place: the value's type and place, for a sealed payload.

        Raises:
            StorageError: the payload is damaged (checksum, truncation, a frame
                that does not decompress or declares another size), declares
                more than ``max_value_size``, or has an encoding this tether
                does not know (written by a newer one).
            DecodeError: a sealed payload whose key is not in the ring (or
                there is no ring), that does not authenticate at ``place``, or
                a payload in clear where the ring refuses plaintext.
        """
        try:
            if encoding & ENCRYPTED or (self.crypt is not None and not self.crypt.allow_plaintext):
                encoding, body = self._open(encoding, payload, where, tag, place)
                data = self._body(encoding, body)
            else:
                data = self._unwrap(encoding, b"" if payload is None else payload)
        except _Damaged as exc:
            at = where() if callable(where) else where
            raise StorageError(
                f"stored value {at} is damaged: {exc}; it cannot be read back as written. "
                "Restore the row from a backup or delete the thread"
            ) from exc
        except _Unknown as exc:
            at = where() if callable(where) else where
            raise StorageError(
                f"value {at} has encoding {encoding!r}, which this tether does not know; "
                "it was probably written by a newer tether, upgrade to read it"
            ) from exc
        if len(data) > self.max_value_size:
            # a value stored uncompressed is checked here, after the fact (its
            # bytes are already in memory), so that max_value_size means the same
            # for every value read back (#18.9)
            at = where() if callable(where) else where
            raise StorageError(
                f"stored value {at} is {len(data):,} bytes, more than max_value_size "
                f"({self.max_value_size:,}); raise max_value_size to read it"
            )
        return data

    def _open(
        self,
        encoding: int,
        payload: bytes | None,
        where: str | Callable[[], str],
        tag: str,
        place: bytes | None,
    ) -> tuple[int, memoryview]:
        """``(encoding, body)`` of a sealed payload opened: its body before sealing
        (what follows the checksum of the encoding without the flag)."""

        def at() -> str:
            return where() if callable(where) else where

        crypt = self.crypt
        if not encoding & ENCRYPTED:
            raise DecodeError(
                f"value {at()} is stored in clear and this saver's encryption has "
                "allow_plaintext=False; seal the store with `tether rekey`, or allow plaintext"
            )
        if encoding & ~(ENCRYPTED | CHECKSUM | _COMPRESSION) or not encoding & CHECKSUM:
            raise _Unknown
        raw = memoryview(payload or b"")
        if len(raw) < 4 or checksum(raw[4:]) != _read_u32(raw)[0]:
            raise StorageError(
                f"stored value {at()} is damaged: its checksum does not match its bytes; it "
                "cannot be read back as written. Restore the row from a backup or delete the "
                "thread"
            )
        sealed = raw[4:]
        if crypt is None:
            raise DecodeError(
                f"value {at()} is encrypted with key {key_id_of(sealed)!r} and this saver has "
                "no keys; give it encryption= (or set TETHER_KEYS) to read it"
            )
        if place is None:
            raise DecodeError(f"encrypted value {at()} was read with no place to check it against")
        plain = crypt.open(_bind(place, tag, encoding), sealed, at)
        return encoding & ~ENCRYPTED, memoryview(plain)

    def _unwrap(self, encoding: int, payload: bytes | memoryview) -> bytes:
        if encoding == CHECKSUM and type(payload) is bytes:
            data = payload[4:]  # the one copy a plain value costs
            if len(payload) < 4 or checksum(data) != _read_u32(payload)[0]:
                raise _Damaged("its checksum does not match its bytes")
            return data
        if encoding == CHECKSUM or encoding == CHECKSUM | ENCODING_ZSTD:
            view = memoryview(payload)
            if len(view) < 4:
                raise _Damaged(f"its {len(view)}-byte payload is shorter than its checksum")
            body = view[4:]
            if checksum(body) != _read_u32(view)[0]:
                raise _Damaged("its checksum does not match its bytes")
            return self._body(encoding, body)
        if encoding == ENCODING_PLAIN:
            return payload if type(payload) is bytes else bytes(payload)
        if encoding == ENCODING_ZSTD:
            return self._unzstd(memoryview(payload), None)
        if encoding == ENCODING_ZLIB:
            return self._unzlib(bytes(payload))
        raise _Unknown

    def _body(self, encoding: int, body: memoryview) -> bytes:
        """The serializer's bytes of a checked body (encodings 4 and 6, without the crc)."""
        if encoding & _COMPRESSION == ENCODING_PLAIN:
            return bytes(body)
        if len(body) < 4:
            raise _Damaged("its compressed payload has no size")
        size = _read_u32(body)[0]
        return self._unzstd(body[4:], size)

    def _unzstd(self, frame: memoryview, size: int | None) -> bytes:
        try:
            declared = zstandard.frame_content_size(frame)
        except zstandard.ZstdError as exc:
            raise _Damaged(f"its zstd frame header is not readable ({exc})") from exc
        if declared < 0:
            raise _Damaged("its zstd frame does not declare its size (tether always writes it)")
        limit = self.max_value_size
        if (size if size is not None else declared) > limit:
            raise _Damaged(
                f"it declares {max(declared, size or 0):,} bytes uncompressed, more than "
                f"max_value_size ({limit:,}); a frame that large was not written by this "
                "saver's settings (raise max_value_size if it was)"
            )
        if size is not None and declared != size:
            raise _Damaged(f"its zstd frame declares {declared:,} bytes, its header {size:,}")
        try:
            out = _zstd_decompressor().decompress(frame, allow_extra_data=False)
        except zstandard.ZstdError as exc:
            raise _Damaged(f"its zstd frame does not decompress ({exc})") from exc
        if len(out) != declared:
            raise _Damaged(f"its zstd frame gave {len(out):,} bytes, not {declared:,}")
        return out

    def _unzlib(self, raw: bytes) -> bytes:
        inflate = zlib.decompressobj()
        try:
            out = inflate.decompress(raw, self.max_value_size + 1)
        except zlib.error as exc:
            raise _Damaged(f"its zlib stream does not decompress ({exc})") from exc
        if len(out) > self.max_value_size or inflate.unconsumed_tail:
            raise _Damaged(f"it inflates to more than max_value_size ({self.max_value_size:,})")
        if not inflate.eof or inflate.unused_data:
            raise _Damaged("its zlib stream is truncated or followed by other bytes")
        return out

    def decode(
        self,
        serde: SerializerProtocol,
        tag: str,
        encoding: int,
        payload: bytes | None,
        *,
        address: Address,
        channel: str | None = None,
        task_id: str | None = None,
        place: bytes | None = None,
    ) -> Any:
        """Decode one stored value; errors name thread, checkpoint and channel.

        ``place``: where it is stored (:mod:`tether.encryption`), for a sealed value.
        """
        data: bytes | None = None
        if self.crypt is not None or encoding & ENCRYPTED:
            data = self.decode_bytes(
                encoding,
                payload,
                where=lambda: where(address, channel, task_id),
                tag=tag,
                place=place,
            )
        elif type(payload) is bytes and len(payload) <= self.max_value_size:
            if encoding == CHECKSUM:  # the common case, inline: one slice, one hash
                body = payload[4:]
                if len(payload) >= 4 and _xxh3(body) & 0xFFFFFFFF == _read_u32(payload)[0]:
                    data = body
            elif encoding == ENCODING_PLAIN:
                data = payload  # a row from before checksums: no copy
        if data is None:
            data = self.decode_bytes(
                encoding, payload, where=lambda: where(address, channel, task_id)
            )
        return decode_value(serde, tag, data, address=address, channel=channel, task_id=task_id)


class _Unknown(Exception):
    """An encoding this tether does not know."""


def sealed_payload(sealed: bytes) -> bytes:
    """The payload stored for sealed bytes: their checksum, then them."""
    return _pack_u32(_xxh3(sealed) & 0xFFFFFFFF) + sealed


_BOUND: dict[tuple[str, int], bytes] = {}  # (type, encoding) -> the end of the associated data


def _bind(place: bytes, tag: str, encoding: int) -> bytes:
    """The associated data of a sealed value: its place, encoding and type."""
    end = _BOUND.get((tag, encoding))
    if end is None:
        end = _pack_u32(encoding) + tag.encode("utf-8", "surrogatepass")
        if len(_BOUND) < 256:  # a saver's types are few; a stray one is not kept
            _BOUND[(tag, encoding)] = end
    return place + end
