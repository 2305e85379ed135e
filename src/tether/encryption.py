"""Encryption at rest (#17): a keyring, authenticated encryption, and what it is bound to.

Every channel value, pending write and (by default) the metadata of a
checkpoint is sealed with AES-256-GCM (the ``cryptography`` package) after
compression. A sealed value names the key that sealed it, so a store holds
values of several keys at once and is re-encrypted under a new one by
``tether rekey STORE --to KID`` while it is read and written.

Sealed bytes (the ``payload`` of an encoded value after its checksum; see
:mod:`tether.backends._payload`)::

    0x02 | len(kid) | kid | salt (8) | nonce (12) | AES-256-GCM ciphertext | tag (16)

(Format 1, still read, had 16-byte salts.) Values are sealed with AES-256-GCM under a *subkey*,
``HKDF-SHA256(key, salt)``, and a random 96-bit nonce. Random nonces under
one AES-GCM key are safe for about 2^32 values (NIST SP 800-38D), which a
busy store writes in months (every put seals several values, rekey seals them
all again). So a writer derives a fresh subkey from a fresh random salt for
every 2^20 values it seals (and per keyring object), which keeps each
subkey's nonces far inside the bound however much is written under one key;
readers derive a subkey once per salt they meet and keep the last few
hundred. The salt, in every value, names the subkey. Eight bytes are enough:
two writers that drew the same salt share a subkey, which only adds their
values under it (2 x 2^20 random nonces still collide with probability about
2^-55), and among 2^24 subkeys of one key (2^44 values) about 2^15 such pairs
are expected.

The associated data (authenticated, not stored) is the header above plus the
value's *place*: ``(thread, namespace, channel, version, base)`` for a
channel value, ``(thread, namespace, checkpoint, task, index, channel)`` for
a pending write, ``(thread, namespace, checkpoint)`` for metadata, plus the
value's type and encoding; ``(thread, namespace, channel, version)`` for a
small value sealed in the checkpoint head (:func:`seal_inline`), where the SQL
backends keep small values so that they cost no row of their own. A
ciphertext copied into another row (another thread, channel, version or
task) does not authenticate there: it is a
:class:`~tether.errors.DecodeError`, never someone else's state. Thread ids
are part of the place, so ``copy_thread`` decrypts and seals again under the
target thread (:mod:`tether.backends._sealing`). Metadata is also bound to
every channel's version in its checkpoint and to its parent.

Format 3 is a checkpoint's *envelope* (:func:`checkpoint_to_seal`): the same
bytes as format 2 with first byte ``0x03``, sealing its metadata together with
the small values its head keeps (which the head marks ``[]``), at the
metadata's place. SQLite writes it (one seal per put instead of one per
small value: :mod:`tether.backends._seal_put`); formats 1 and 2 are read
everywhere, and a head may mix values in its envelope, values sealed on their
own (carried over from a parent) and, with ``allow_plaintext``, values in
clear.

Why one long module: the keyring, the formats and places, and the sealing of
metadata and head values are one scheme, documented here once; each part
reads the header, the places and the formats the others write.

Keys come from ``encryption=`` on every saver, or from the environment::

    TETHER_KEYS=k2:<base64 of 32 bytes>,k1:<base64 of 32 bytes>
    TETHER_ACTIVE_KEY=k2      # optional: the first key listed is the active one

The active key seals; every listed key opens.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import count
from typing import Any

import msgspec

from tether.errors import ConfigError, DecodeError

__all__ = [
    "DEFAULT_CLEAR_METADATA",
    "SEALED_METADATA",
    "Encryption",
    "checkpoint_to_seal",
    "encryption_from",
    "in_envelope",
    "inline_place",
    "inline_sealed",
    "inline_stored",
    "key_id_of",
    "metadata_place",
    "metadata_to_seal",
    "open_checkpoint",
    "open_head",
    "open_inline",
    "open_metadata",
    "seal_inline",
    "seal_metadata",
    "sealed_metadata",
    "value_place",
    "write_place",
]

#: Metadata keys kept in clear by default (next to their sealed copy), so that
#: ``list(filter=...)``, ``delete_for_runs`` and LangGraph's history work:
#: LangGraph's own keys, and the addressing keys that are in clear anyway.
DEFAULT_CLEAR_METADATA = frozenset(
    {"source", "step", "parents", "run_id", "thread_id", "checkpoint_ns", "checkpoint_id"}
)

#: The metadata key that holds the sealed metadata (a reserved name).
SEALED_METADATA = "__tether_sealed__"

_FORMAT = 2  # values and metadata written; 1 (16-byte salts) is still read
_ENVELOPE = 3  # a checkpoint's metadata sealed with the small values of its head
_SALTS = {1: 16, 2: 8, 3: 8}  # salt length by format
_SALT = _SALTS[_FORMAT]
_NONCE = 12
_TAG = 16
#: Values a writer seals under one subkey before it derives the next.
SUBKEY_USES = 1 << 20
_READ_CACHE = 256  # subkeys a keyring keeps for reading
_KEY_BYTES = 32
_INFO = b"tether aead v1"
_KID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_pack = msgspec.msgpack.Encoder().encode
_encode_json = msgspec.json.encode
_b64encode = base64.b64encode
_b64decode = base64.b64decode
_b2a = binascii.b2a_base64
_urandom = os.urandom
_decode_json = msgspec.json.decode


_Writer = tuple[bytes, bytes, Any, Iterator[int], bytes, bytes]


def _framed(kind: str, fields: tuple[str | int | None, ...]) -> bytes:
    # A MessagePack array: every field framed by its type and length, so no two
    # places give the same bytes. Names are valid UTF-8 on every backend.
    return _pack(("tether/1", kind, *fields))


def value_place(thread_id: str, ns: str, channel: str, version: str, base: str | None) -> bytes:
    """The associated data of a channel value: where it is stored."""
    return _framed("value", (thread_id, ns, channel, version, base))


def inline_place(thread_id: str, ns: str, channel: str, version: str) -> bytes:
    """The associated data of a small value sealed inline in a checkpoint head.

    A place of its own kind: the same value at the same version as a value
    row is bound differently, so neither ciphertext opens as the other.
    """
    return _framed("inline", (thread_id, ns, channel, version))


def write_place(
    thread_id: str, ns: str, checkpoint_id: str, task_id: str, idx: int, channel: str
) -> bytes:
    """The associated data of a pending write: where it is stored."""
    return _framed("write", (thread_id, ns, checkpoint_id, task_id, idx, channel))


def metadata_place(thread_id: str, ns: str, checkpoint_id: str) -> bytes:
    """The associated data of a checkpoint's sealed metadata."""
    return _framed("metadata", (thread_id, ns, checkpoint_id))


@functools.lru_cache(maxsize=64)
def _header(kid: str, fmt: int = _FORMAT) -> bytes:
    raw = kid.encode("ascii")
    return bytes((fmt, len(raw))) + raw


def key_id_of(sealed: bytes | memoryview) -> str | None:
    """The key id a sealed value names (``None``: not sealed bytes tether knows)."""
    if len(sealed) < 2 or sealed[0] not in _SALTS:
        return None
    n = sealed[1]
    kid = bytes(sealed[2 : 2 + n])
    return kid.decode("ascii", "replace") if len(kid) == n else None


def _decode_key(kid: str, key: bytes | str) -> bytes:
    if isinstance(key, str):
        try:
            raw = base64.b64decode(key.strip().encode("ascii"), altchars=b"-_", validate=False)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise ConfigError(f"key {kid!r} is not base64") from None
    elif isinstance(key, bytes | bytearray):
        raw = bytes(key)
    else:
        raise ConfigError(f"key {kid!r} must be 32 bytes or their base64, got {type(key).__name__}")
    if len(raw) != _KEY_BYTES:
        raise ConfigError(
            f"key {kid!r} is {len(raw)} bytes; AES-256 keys are 32 bytes "
            "(make one with tether.encryption.Encryption.generate_key())"
        )
    return raw


class Encryption:
    """A keyring and what to encrypt: the ``encryption=`` of every saver.

    Args:
        keys: key id -> 32-byte key (bytes, or base64 text). Key ids are 1-64
            characters of ``A-Za-z0-9._-``; they are stored in clear in every
            sealed value. The first key is the active one unless ``active``.
        active: the key id that seals new values.
        metadata: seal checkpoint metadata too (default). The keys in
            ``clear_metadata`` stay readable in clear beside the sealed copy,
            for filters; values read back always come from the sealed copy.
        clear_metadata: metadata keys kept in clear, added to
            :data:`DEFAULT_CLEAR_METADATA`. Filtering on any other key is a
            :class:`~tether.errors.ConfigError`.
        allow_plaintext: read values stored in clear (a store that had
            encryption turned on later). Set ``False`` once ``tether rekey``
            has sealed everything: a value in clear is then refused, so
            nobody with write access to the database can slip one in.

    The keys never appear in ``repr`` or in messages.
    """

    __slots__ = (
        "_aead",
        "_hkdf",
        "_invalid",
        "_keys",
        "_lock",
        "_readers",
        "_sha256",
        "_writer",
        "active",
        "allow_plaintext",
        "clear_metadata",
        "metadata",
    )

    def __init__(
        self,
        keys: Mapping[str, bytes | str],
        *,
        active: str | None = None,
        metadata: bool = True,
        clear_metadata: Iterable[str] = (),
        allow_plaintext: bool = True,
    ) -> None:
        # Imported here, not with tether: only a saver that encrypts pays for it.
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.hashes import SHA256
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        if not isinstance(keys, Mapping) or not keys:
            raise ConfigError("encryption needs at least one key: {key_id: 32-byte key}")
        parsed: dict[str, bytes] = {}
        for kid, key in keys.items():
            if not isinstance(kid, str) or not _KID.match(kid):
                raise ConfigError(
                    f"key id {kid!r} must be 1-64 characters of letters, digits, '.', '_', '-'"
                )
            parsed[kid] = _decode_key(kid, key)
        active = next(iter(parsed)) if active is None else active
        if active not in parsed:
            raise ConfigError(f"active key {active!r} is not among the keys {sorted(parsed)}")
        if isinstance(clear_metadata, str):
            raise ConfigError("clear_metadata must be a list of metadata keys, not one string")
        clear = frozenset(clear_metadata)
        if SEALED_METADATA in clear or not all(isinstance(k, str) for k in clear):
            raise ConfigError(f"clear_metadata must be strings other than {SEALED_METADATA!r}")
        self._keys = parsed
        self._aead = AESGCM
        self._hkdf = HKDF
        self._sha256 = SHA256
        self._invalid = InvalidTag
        self._fresh_state()
        self.active = active
        self.metadata = bool(metadata)
        self.clear_metadata = DEFAULT_CLEAR_METADATA | clear
        self.allow_plaintext = bool(allow_plaintext)

    # --- construction ---------------------------------------------------------------

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **options: Any
    ) -> Encryption | None:
        """The keyring of ``TETHER_KEYS`` (``kid:base64,...``) and ``TETHER_ACTIVE_KEY``.

        ``None`` when ``TETHER_KEYS`` is unset or empty. ``options`` as the constructor's.
        """
        env = os.environ if environ is None else environ
        spec = env.get("TETHER_KEYS", "").strip()
        if not spec:
            return None
        keys: dict[str, str] = {}
        for i, item in enumerate(spec.split(",")):
            kid, sep, key = item.strip().partition(":")
            if not sep or not kid or not key:
                raise ConfigError(
                    f"TETHER_KEYS item {i + 1} is not `key_id:base64key` "
                    "(items separated by commas)"
                )
            if kid in keys:
                raise ConfigError(f"TETHER_KEYS names key {kid!r} twice")
            keys[kid] = key
        active = env.get("TETHER_ACTIVE_KEY", "").strip() or None
        options.setdefault("active", active)
        return cls(keys, **options)

    @staticmethod
    def generate_key() -> str:
        """A new random 32-byte key, base64 (for ``TETHER_KEYS`` or ``keys=``)."""
        return base64.b64encode(os.urandom(_KEY_BYTES)).decode("ascii")

    def with_active(self, kid: str, *, allow_plaintext: bool | None = None) -> Encryption:
        """The same keyring and options, sealing with key ``kid``."""
        if kid not in self._keys:
            raise ConfigError(f"key {kid!r} is not in the keyring (it has {self.key_ids})")
        out = Encryption.__new__(Encryption)
        out._keys = self._keys
        out._aead = self._aead
        out._hkdf = self._hkdf
        out._sha256 = self._sha256
        out._invalid = self._invalid
        out._fresh_state()
        out.active = kid
        out.metadata = self.metadata
        out.clear_metadata = self.clear_metadata
        out.allow_plaintext = self.allow_plaintext if allow_plaintext is None else allow_plaintext
        return out

    @property
    def key_ids(self) -> list[str]:
        """The ids of every key in the ring, active first."""
        return [self.active, *(k for k in self._keys if k != self.active)]

    def __repr__(self) -> str:
        return f"Encryption(keys={self.key_ids!r}, active={self.active!r})"

    # --- sealing ---------------------------------------------------------------------

    def header(self, kid: str | None = None) -> bytes:
        """The sealed-bytes prefix of key ``kid`` (the active key's by default)."""
        return _header(kid or self.active)

    def is_active(self, sealed: bytes | memoryview) -> bool:
        """Whether sealed bytes are sealed under the active key in a format this tether
        writes (2, or 3 for a checkpoint's envelope): what ``rekey`` leaves alone."""
        header = self.header()
        return (
            bool(sealed)
            and sealed[0] in (_FORMAT, _ENVELOPE)
            and (bytes(sealed[1 : len(header)]) == header[1:])
        )

    def _fresh_state(self) -> None:
        self._lock = threading.Lock()
        # The subkey this ring seals with: (header, header + salt, AESGCM, values sealed so
        # far: an itertools.count, whose next() is atomic, so sealing takes no lock,
        # and the header and header + salt of an envelope, format 3).
        self._writer: _Writer | None = None
        self._readers: dict[bytes, Any] = {}  # header + salt -> subkey

    def _subkey(self, kid: str, salt: bytes) -> Any:
        okm = self._hkdf(algorithm=self._sha256(), length=32, salt=salt, info=_INFO).derive(
            self._keys[kid]
        )
        return self._aead(okm)

    def _next_writer(self, spent: _Writer | None) -> _Writer:
        """A fresh subkey to seal with, once the one ``spent`` has sealed SUBKEY_USES values."""
        with self._lock:
            w = self._writer
            if w is None or w is spent:  # not replaced by another thread meanwhile
                kid = self.active
                salt = os.urandom(_SALT)
                header, envelope = _header(kid), _header(kid, _ENVELOPE)
                aead = self._subkey(kid, salt)
                w = (header, header + salt, aead, count(1), envelope, envelope + salt)
                self._writer = w
            return w

    def seal(self, place: bytes, data: bytes | memoryview) -> bytes:
        """``data`` encrypted under the active key, bound to ``place``."""
        w = self._writer
        if w is None or next(w[3]) >= SUBKEY_USES:
            w = self._next_writer(w)
        nonce = _urandom(_NONCE)
        sealed: bytes = w[2].encrypt(nonce, data, w[0] + place)
        return w[1] + nonce + sealed

    def seal_many(
        self,
        items: Sequence[tuple[bytes, bytes | memoryview]],
        envelope: tuple[bytes, bytes] | None = None,
    ) -> list[bytes]:
        """:meth:`seal` of each ``(place, data)``, then (if given) ``envelope`` sealed as a
        checkpoint's envelope (format 3, :func:`checkpoint_to_seal`), last.

        A put or a batch of pending writes seals a few values at once: one
        read of the system's random source gives all their nonces (random, as
        :meth:`seal`'s: slices of one ``os.urandom`` are as independent as
        separate reads, and the read is a system call that cost about as much
        as sealing a small value).
        """
        nonces = _urandom(_NONCE * (len(items) + (envelope is not None)))
        out = []
        at = 0
        w = self._writer
        for place, data in items:
            if w is None or next(w[3]) >= SUBKEY_USES:
                w = self._next_writer(w)
            nonce = nonces[at : at + _NONCE]
            at += _NONCE
            out.append(w[1] + nonce + w[2].encrypt(nonce, data, w[0] + place))
        if envelope is not None:
            if w is None or next(w[3]) >= SUBKEY_USES:
                w = self._next_writer(w)
            nonce = nonces[at:]
            out.append(w[5] + nonce + w[2].encrypt(nonce, envelope[1], w[4] + envelope[0]))
        return out

    def _reader(self, prefix: bytes, where: Callable[[], str]) -> Any:
        """The subkey of sealed bytes starting with ``prefix`` (header and salt)."""
        # A dict read is atomic: the cache is only locked to change it.
        aead = self._readers.get(prefix)
        if aead is not None:
            return aead
        kid = key_id_of(prefix)
        if kid is None:
            raise DecodeError(
                f"encrypted value {where()} has a header this tether does not know "
                f"(format {prefix[0] if prefix else None!r}); it is damaged, or was "
                "written by a newer tether"
            )
        if kid not in self._keys:
            raise DecodeError(
                f"value {where()} is encrypted with key {kid!r}, which this saver's keyring "
                f"does not have (it has {self.key_ids}); add key {kid!r} to encryption= or "
                "TETHER_KEYS to read it"
            )
        aead = self._subkey(kid, prefix[2 + prefix[1] :])
        with self._lock:
            if len(self._readers) >= _READ_CACHE:
                self._readers.clear()
            self._readers[prefix] = aead
        return aead

    def open(self, place: bytes, sealed: bytes | memoryview, where: Callable[[], str]) -> bytes:
        """The plaintext of sealed bytes bound to ``place``.

        Raises:
            DecodeError: naming the key id and ``where()``: the key is not in
                the ring, or the bytes do not authenticate (changed, moved
                from another row, or sealed by another key of the same id).
        """
        start = 2 + (sealed[1] if len(sealed) > 1 else 0)
        salted = start + _SALTS.get(sealed[0] if sealed else 0, 0)
        if salted == start:
            raise DecodeError(
                f"encrypted value {where()} has a header this tether does not know "
                f"(format {sealed[0] if sealed else None!r}); it is damaged, or was "
                "written by a newer tether"
            )
        if len(sealed) < salted + _NONCE + _TAG:
            kid = key_id_of(sealed)
            raise DecodeError(f"encrypted value {where()} (key {kid!r}) is truncated")
        prefix = bytes(sealed[:salted])
        aead = self._readers.get(prefix) or self._reader(prefix, where)
        try:
            out: bytes = aead.decrypt(
                sealed[salted : salted + _NONCE], sealed[salted + _NONCE :], prefix[:start] + place
            )
        except self._invalid:
            raise DecodeError(
                f"encrypted value {where()} does not authenticate under key "
                f"{key_id_of(prefix)!r}: it was changed, copied from another row, or sealed "
                "by another key with that id; it is not read"
            ) from None
        return out

    # --- metadata ----------------------------------------------------------------------

    def check_filter(self, want: Mapping[str, Any]) -> None:
        """Refuse a ``list`` filter on metadata keys that are stored sealed.

        Raises:
            ConfigError: naming the keys, and how to keep them in clear.
        """
        if not self.metadata or not want:
            return
        sealed = sorted(k for k in want if k not in self.clear_metadata)
        if sealed:
            raise ConfigError(
                f"filter on metadata key(s) {sealed} that this saver stores encrypted: a "
                "filter on them would match nothing. Keep them in clear with "
                "Encryption(..., clear_metadata=[...]) (existing checkpoints keep theirs "
                f"sealed until `tether rekey`), or filter on {sorted(self.clear_metadata)}"
            )


# --- metadata --------------------------------------------------------------------------


def seal_metadata(
    crypt: Encryption,
    metadata: Mapping[str, Any],
    place: bytes,
    versions: Mapping[str, str],
    parent_id: str | None,
    values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metadata a put stores: the clear keys, and everything sealed under one key.

    The sealed copy holds the whole metadata (clear keys too: what a read
    returns is the authenticated copy). The checkpoint's channel versions and
    parent are part of its associated data (not stored twice), so a head
    edited to point a channel at another version, or the checkpoint at another
    parent, no longer authenticates its metadata and is refused on read.
    ``values``: the small values its head keeps sealed with it (format 3,
    :func:`checkpoint_to_seal`); ``None``: the metadata alone (format 2), or
    in clear if the ring keeps metadata in clear.

    Raises:
        ConfigError: the metadata uses the reserved key.
    """
    if values is not None:
        ad, plain = checkpoint_to_seal(metadata, place, versions, parent_id, values)
        return sealed_metadata(crypt, metadata, crypt.seal_many((), (ad, plain))[0])
    item = metadata_to_seal(crypt, metadata, place, versions, parent_id)
    if item is None:
        return dict(metadata)
    return sealed_metadata(crypt, metadata, crypt.seal(*item))


def metadata_to_seal(
    crypt: Encryption,
    metadata: Mapping[str, Any],
    place: bytes,
    versions: Mapping[str, str],
    parent_id: str | None,
) -> tuple[bytes, bytes] | None:
    """What :func:`seal_metadata` seals without values (format 2), ``(associated data,
    plaintext)``, for a caller that seals it with others (:meth:`Encryption.seal_many`);
    ``None``: the ring keeps metadata in clear.

    Raises:
        ConfigError: the metadata uses the reserved key.
    """
    if SEALED_METADATA in metadata:
        raise _reserved()
    if not crypt.metadata:
        return None
    return _checkpoint_bound(place, versions, parent_id), _encode_json(metadata)


def checkpoint_to_seal(
    metadata: Mapping[str, Any],
    place: bytes,
    versions: Mapping[str, str],
    parent_id: str | None,
    values: Mapping[str, Any],
) -> tuple[bytes, bytes]:
    """A checkpoint's *envelope* (format 3), ``(associated data, plaintext)`` for
    :meth:`Encryption.seal_many`'s ``envelope``: its metadata and the small values
    its head keeps, sealed as one value.

    The plaintext is the JSON array ``[metadata, {channel: value}]``; the head
    marks each of those channels ``[]``. The associated data is the metadata's
    (thread, namespace, checkpoint, every channel's version, parent), so each
    value is bound to its channel's version in this checkpoint. One seal
    instead of one per value: a put of a few small channels sealed each one,
    and the seals, not the cipher, were most of encryption's cost
    (``docs/encryption.md``). A put that carries such a value over seals it on
    its own in the new head (:func:`seal_inline`), as the value of a head
    written before format 3.

    Raises:
        ConfigError: the metadata uses the reserved key.
    """
    if SEALED_METADATA in metadata:
        raise _reserved()
    return _checkpoint_bound(place, versions, parent_id), _encode_json((metadata, values))


def _reserved() -> ConfigError:
    return ConfigError(f"metadata key {SEALED_METADATA!r} is reserved for encrypted metadata")


def sealed_metadata(
    crypt: Encryption, metadata: Mapping[str, Any], sealed: bytes
) -> dict[str, Any]:
    """The metadata a put stores, from the seal of :func:`metadata_to_seal` or
    :func:`checkpoint_to_seal`: the clear keys and the sealed copy."""
    clear = crypt.clear_metadata
    out = {k: v for k, v in metadata.items() if k in clear}
    out[SEALED_METADATA] = _b2a(sealed)[:-1].decode()  # base64, without its newline
    return out


def _checkpoint_bound(place: bytes, versions: Mapping[str, str], parent_id: str | None) -> bytes:
    """Metadata's associated data: its place, the checkpoint's versions and parent."""
    return place + _pack((sorted(versions.items()), parent_id))


def open_metadata(
    crypt: Encryption | None,
    stored: Mapping[str, Any],
    place: bytes,
    versions: Mapping[str, str],
    parent_id: str | None,
    where: Callable[[], str],
) -> Mapping[str, Any]:
    """The metadata of a checkpoint as put, from what is stored (sealed or in clear).

    Raises:
        DecodeError: as :func:`open_checkpoint`.
    """
    return open_checkpoint(crypt, stored, place, versions, parent_id, where)[0]


def open_checkpoint(
    crypt: Encryption | None,
    stored: Mapping[str, Any],
    place: bytes,
    versions: Mapping[str, str],
    parent_id: str | None,
    where: Callable[[], str],
) -> tuple[Mapping[str, Any], dict[str, Any] | None]:
    """``(metadata as put, the head values sealed with it)`` from stored metadata.

    The values are ``None`` unless the metadata is an envelope (format 3,
    :func:`checkpoint_to_seal`).

    Raises:
        DecodeError: naming the key id and the checkpoint: the key is missing,
            the sealed copy does not authenticate, or it disagrees with the
            stored clear keys, versions or parent (the row was edited).
    """
    sealed = stored.get(SEALED_METADATA)
    if sealed is None:
        if crypt is not None and crypt.metadata and not crypt.allow_plaintext:
            raise DecodeError(
                f"metadata {where()} is stored in clear and this saver's encryption has "
                "allow_plaintext=False; seal the store with `tether rekey`, or allow plaintext"
            )
        return stored, None
    try:
        raw = _b64decode(sealed, validate=True) if type(sealed) is str else b""
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        raise DecodeError(f"sealed metadata {where()} is not base64; the row is damaged")
    if crypt is None:
        raise DecodeError(
            f"metadata {where()} is encrypted with key {key_id_of(raw)!r} and this saver has "
            "no keys; give it encryption= (or set TETHER_KEYS) to read it"
        )
    try:
        plain = crypt.open(_checkpoint_bound(place, versions, parent_id), raw, where)
    except DecodeError as exc:
        exc.add_context(
            "sealed metadata is bound to its checkpoint's thread, namespace, id, channel "
            "versions and parent: one of them was changed, or it was copied from another row"
        )
        raise
    # The format is authenticated (the header is part of the associated data).
    values = None
    meta = _decode_json(plain)
    if raw[0] == _ENVELOPE:
        if type(meta) is not list or len(meta) != 2 or type(meta[1]) is not dict:
            raise DecodeError(f"sealed metadata {where()} is not a checkpoint envelope")
        meta, values = meta
    if type(meta) is not dict:
        raise DecodeError(f"sealed metadata {where()} is not a metadata object")
    for key, value in stored.items():
        if key != SEALED_METADATA and (key not in meta or meta[key] != value):
            raise DecodeError(
                f"metadata key {key!r} {where()} differs from its sealed copy: the row was "
                "changed in the store after it was written; it is not read"
            )
    return meta, values


# --- small values sealed in the head ------------------------------------------------------


def seal_inline(crypt: Encryption, place: bytes, value: Any) -> list[str]:
    """A small channel value as a head keeps it sealed: ``[base64]``.

    The value is one that survives JSON exactly
    (:func:`~tether.backends._inline.inline_value`); its JSON text is sealed
    at its :func:`inline_place`. A head's clear inline values are never JSON
    arrays, so the one-element array marks the value as sealed (4 bytes more
    than its base64). It names no checkpoint: a put that carries the channel
    over copies it as it is, like a value row.
    """
    return inline_stored(crypt.seal(place, _encode_json(value)))


def inline_stored(sealed: bytes) -> list[str]:
    """A head's inline value as stored, from its sealed JSON text (:func:`seal_inline`)."""
    return [_b2a(sealed)[:-1].decode()]  # base64, without its newline


def in_envelope(stored: Any) -> bool:
    """Whether a head's inline value is ``[]``: sealed in its checkpoint's envelope
    (format 3, :func:`checkpoint_to_seal`)."""
    return type(stored) is list and not stored


def inline_sealed(stored: Any) -> bytes | None:
    """The sealed bytes of a head's inline value (``None``: a value in clear).

    Raises:
        DecodeError: an array or object that is not a sealed value (the head
            was changed).
    """
    kind = type(stored)
    if kind is not list:
        if kind is dict:
            raise DecodeError("a value inline in the checkpoint head is neither clear nor sealed")
        return None
    try:
        text = stored[0] if len(stored) == 1 else None
        raw = _b64decode(text, validate=True) if type(text) is str else b""
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        raise DecodeError("a value inline in the checkpoint head is neither clear nor sealed")
    return raw


def open_inline(
    crypt: Encryption | None, stored: Any, place: bytes, where: Callable[[], str]
) -> Any:
    """A head's inline value as put, from what the head stores (sealed or in clear).

    Raises:
        DecodeError: naming the key id and the value: no keyring, a key the
            ring lacks, bytes that do not authenticate at ``place`` (changed,
            or copied from another thread, channel or version), or a value in
            clear where the ring refuses plaintext.
    """
    try:
        raw = inline_sealed(stored)
    except DecodeError as exc:
        raise DecodeError(f"{exc} (value {where()}); the row is damaged") from None
    if raw is None:
        if crypt is not None and not crypt.allow_plaintext:
            raise DecodeError(
                f"value {where()} is kept in clear in its checkpoint head and this saver's "
                "encryption has allow_plaintext=False; seal the store with `tether rekey`, "
                "or allow plaintext"
            )
        return stored
    if crypt is None:
        raise DecodeError(
            f"value {where()} is encrypted with key {key_id_of(raw)!r} and this saver has "
            "no keys; give it encryption= (or set TETHER_KEYS) to read it"
        )
    return _decode_json(crypt.open(place, raw, where))


def open_head(
    crypt: Encryption | None,
    thread_id: str,
    ns: str,
    versions: Mapping[str, str],
    values: Mapping[str, Any],
    where: Callable[[str], str],
    envelope: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A head's inline values (``channel_values``) as put: :func:`open_inline` of each,
    and those marked ``[]`` from ``envelope``, the values its checkpoint's envelope
    holds (:func:`open_checkpoint`).

    ``where(channel)`` names the value in errors.

    Raises:
        DecodeError: as :func:`open_inline`; or the channels marked ``[]`` are not
            exactly those the envelope holds (the head was changed).
    """
    out = {}
    enveloped = 0
    for channel, stored in values.items():
        if type(stored) is list and not stored:  # in_envelope
            if envelope is None or channel not in envelope:
                raise DecodeError(
                    f"value {where(channel)} is marked as sealed with its checkpoint's "
                    "metadata, which does not hold it: the head was changed; it is not read"
                )
            out[channel] = envelope[channel]
            enveloped += 1
            continue
        place = inline_place(thread_id, ns, channel, str(versions.get(channel)))
        out[channel] = open_inline(crypt, stored, place, functools.partial(where, channel))
    if envelope and enveloped != len(envelope):
        lost = min(c for c in envelope if not in_envelope(values.get(c)))
        raise DecodeError(
            f"value {where(lost)} was sealed with its checkpoint's metadata and the head no "
            "longer marks it so: the head was changed; it is not read"
        )
    return out


def encryption_from(value: Any) -> Encryption | None:
    """A saver's ``encryption=`` argument as an :class:`Encryption` (or ``None``: off).

    ``None`` (the default): ``TETHER_KEYS`` if set, else no encryption.
    ``False``: no encryption, whatever the environment (encrypted values then
    fail to read, naming their key). An :class:`Encryption`; or a mapping of
    key id -> key (the first one active).
    """
    if value is None:
        return Encryption.from_env()
    if value is False:
        return None
    if isinstance(value, Encryption):
        return value
    if isinstance(value, Mapping):
        return Encryption(value)
    raise ConfigError(
        "encryption= takes an Encryption, a {key_id: key} mapping, False (off) or None "
        f"(TETHER_KEYS), got {type(value).__name__}"
    )
