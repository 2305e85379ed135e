"""Reading ext 6, a NumPy array ``[dtype, shape, order, buffer]`` (SPEC S3.2).

Kept apart from the ext hook because an array's buffer is the bulk of its
payload: it is found in place and copied once, into the new array, instead of
being unpacked into a bytes object first. As everywhere in decoding, every
MessagePack value read here must end exactly where its bytes end (#18.3): a
payload with bytes to spare is refused, not read in part.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from tether.errors import DecodeError
from tether.serde._ext import EXT_NUMPY_ARRAY

# no ext hook: an ext value in the head is an msgspec Ext, which fails the checks
_unpack = msgspec.msgpack.Decoder().decode


_BIN_LEN_BYTES = {0xC4: 1, 0xC5: 2, 0xC6: 4}  # bin 8/16/32: bytes of the length field


def _split_numpy(data: bytes | memoryview) -> tuple[Any, memoryview | bytes]:
    """``[dtype, shape, order]`` and the buffer, without copying the buffer.

    The buffer is the payload's last item, so its bytes are the tail of
    ``data``: find the bin header that makes it so, check that the head decodes
    as three items, and view the tail in place (unpacking would copy 1 MB
    only for it to be copied again into the array).
    """
    total = len(data)
    for pos in range(1, min(total, 512) if total and data[0] == 0x94 else 0):
        size = _BIN_LEN_BYTES.get(data[pos])
        if size is None:
            continue
        start = pos + 1 + size
        if start + int.from_bytes(data[pos + 1 : start], "big") != total:
            continue
        try:
            head = _unpack(b"\x93" + data[1:pos])
        except msgspec.DecodeError:
            continue
        return head, memoryview(data)[start:]
    meta = _unpack(data)
    if not isinstance(meta, list) or len(meta) != 4:
        raise DecodeError("malformed ext 6 (numpy array) payload: expected 4 items")
    return meta[:3], meta[3]


# first byte of an ext value -> (bytes of its length field, or the fixed size)
EXT_HEADS = {
    b"\xd4": (0, 1),
    b"\xd5": (0, 2),
    b"\xd6": (0, 4),
    b"\xd7": (0, 8),
    b"\xd8": (0, 16),
    b"\xc7": (1, 0),
    b"\xc8": (2, 0),
    b"\xc9": (4, 0),
}


def read_whole(raw: bytes) -> Any:
    """A message that is one NumPy array (ext 6), read in place; None for anything else.

    The array's bytes are copied once, from the caller's bytes into the
    array, without the decoder and the ext hook around them. Anything
    unexpected returns None, and the general path reads (or reports) it.
    """
    width, fixed = EXT_HEADS[raw[:1]]
    start = 2 + width
    if len(raw) < start or raw[start - 1] != EXT_NUMPY_ARRAY:
        return None
    size = int.from_bytes(raw[1 : 1 + width], "big") if width else fixed
    if start + size != len(raw):
        return None
    try:
        return read_array(memoryview(raw)[start:])
    except Exception:
        return None


def read_array(data: bytes | memoryview) -> Any:
    np = _numpy_mod[0] if _numpy_mod else _numpy_module()
    if len(data) <= SMALL_ARRAY:
        meta = _unpack(data)
        if type(meta) is not list or len(meta) != 4:
            raise DecodeError("malformed ext 6 (numpy array) payload: expected 4 items")
        dtype_str, shape, order, buf = meta
    else:
        head, buf = _split_numpy(data)
        if type(head) is not list or len(head) != 3:
            raise DecodeError("malformed ext 6 (numpy array) payload: expected 4 items")
        dtype_str, shape, order = head
    if (
        type(dtype_str) is not str
        or type(shape) is not list
        or (order != "C" and order != "F")
        or not isinstance(buf, bytes | memoryview)
    ):
        raise DecodeError("malformed ext 6 (numpy array) payload")
    for n in shape:
        if type(n) is not int or n < 0:
            raise DecodeError(f"malformed ext 6 (numpy array) payload: shape {shape!r}")
    dtype = _DTYPES.get(dtype_str)
    if dtype is None:
        dtype = np.dtype(dtype_str)
        if dtype.hasobject:
            raise DecodeError("refusing a NumPy array of dtype object (it would need pickle)")
        if len(_DTYPES) < 256:
            _DTYPES[dtype_str] = dtype
    if math.prod(shape) * dtype.itemsize != len(buf):  # buf is bytes or a view of bytes
        raise DecodeError(
            f"malformed ext 6 (numpy array) payload: {len(buf)} bytes for shape {shape} of {dtype}"
        )
    # an array over the stored bytes is read-only; the copy gives back an array
    # as writable as the one that was stored (and owning its data)
    return np.ndarray(tuple(shape), dtype, buf, 0, None, order).copy(order="K")


# Below this size an array's payload is unpacked whole: copying its buffer once
# more costs less than finding the buffer in place (_split_numpy).
SMALL_ARRAY = 16384
_DTYPES: dict[str, Any] = {}  # dtype string -> numpy.dtype, parsed once
_numpy_mod: list[Any] = []


def _numpy_module() -> Any:
    if _numpy_mod:
        return _numpy_mod[0]
    try:
        import numpy
    except ImportError as exc:
        raise DecodeError(
            "the value holds a NumPy array but numpy is not installed; pip install numpy"
        ) from exc
    _numpy_mod.append(numpy)
    return numpy
