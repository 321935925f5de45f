"""The openpi numpy-over-msgpack codec, spoken natively (openpi-client pins numpy<2).

Wire format, as openpi's `msgpack_numpy` writes it: plain msgpack (no extension types) with
`use_bin_type=True`; every numpy array becomes a map whose keys are msgpack *bin* strings, in this
order: `b"__ndarray__": true, b"data": <C-order bytes>, b"dtype": <dtype.str>, b"shape": [dims]`.
A numpy scalar becomes `b"__npgeneric__": true, b"data": <item()>, b"dtype": <dtype.str>`.
Object, void and complex dtypes are refused both ways: an array is rebuilt from raw bytes and
nothing on the network is ever unpickled. The decoder also accepts text (str) keys, which some
re-implementations emit; the encoder always writes the bin keys openpi's decoder looks up.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

from spabench.errors import ProtocolError

__all__ = ["CodecError", "packb", "unpackb", "Packer", "encode_numpy", "decode_numpy"]

_REFUSED_KINDS = frozenset("OVc")  # object, void (structured/raw), complex
_ND, _NG = b"__ndarray__", b"__npgeneric__"


class CodecError(ProtocolError):
    """A value cannot be carried by the openpi codec, or a frame does not decode."""


def _check_dtype(dtype: np.dtype, where: str) -> None:
    if dtype.kind in _REFUSED_KINDS or dtype.hasobject:
        raise CodecError(f"{where}: numpy dtype {dtype.str!r} is not allowed on the wire "
                         "(object, void and complex dtypes are refused)")


def encode_numpy(obj: Any) -> Any:
    """msgpack `default` hook: numpy arrays and scalars to openpi's marker maps."""
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype, "encode")
        return {_ND: True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": obj.dtype.str,
                b"shape": obj.shape}
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype, "encode")
        return {_NG: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise CodecError(f"encode: cannot carry a {type(obj).__name__} in an openpi frame")


def _get(obj: dict, key: bytes) -> Any:
    if key in obj:
        return obj[key]
    return obj.get(key.decode())


def _dtype(value: Any) -> np.dtype:
    text = value.decode() if isinstance(value, bytes) else value
    if not isinstance(text, str):
        raise CodecError(f"decode: array dtype must be a string like '<f4', got {value!r}")
    try:
        dtype = np.dtype(text)
    except TypeError as exc:
        raise CodecError(f"decode: unknown numpy dtype {text!r}") from exc
    _check_dtype(dtype, "decode")
    return dtype


def decode_numpy(obj: dict) -> Any:
    """msgpack `object_hook`: openpi's marker maps back to numpy (writable copies)."""
    if _get(obj, _ND):
        dtype = _dtype(_get(obj, b"dtype"))
        shape = _get(obj, b"shape")
        data = _get(obj, b"data")
        if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise CodecError(f"decode: array shape must be a list of non-negative ints, got {shape!r}")
        if not isinstance(data, (bytes, bytearray)):
            raise CodecError(f"decode: array data must be bytes, got {type(data).__name__}")
        if len(data) != math.prod(shape) * dtype.itemsize:
            raise CodecError(f"decode: array of shape {tuple(shape)} and dtype {dtype.str} needs "
                             f"{math.prod(shape) * dtype.itemsize} bytes, frame holds {len(data)}")
        return np.frombuffer(data, dtype=dtype).reshape(tuple(shape)).copy()
    if _get(obj, _NG):
        dtype = _dtype(_get(obj, b"dtype"))
        try:
            return dtype.type(_get(obj, b"data"))
        except (TypeError, ValueError) as exc:
            raise CodecError(f"decode: bad numpy scalar of dtype {dtype.str}: {exc}") from exc
    return obj


def packb(obj: Any) -> bytes:
    """One openpi frame."""
    try:
        return msgpack.packb(obj, default=encode_numpy, use_bin_type=True)
    except CodecError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise CodecError(f"encode: {exc}") from exc


def unpackb(data: bytes) -> Any:
    """Decode one openpi frame."""
    try:
        return msgpack.unpackb(data, object_hook=decode_numpy, raw=False)
    except CodecError:
        raise
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise CodecError(f"decode: not a valid msgpack frame: {exc}") from exc


class Packer:
    """A reusable encoder (saves re-creating msgpack's buffer for every frame)."""

    def __init__(self) -> None:
        self._packer = msgpack.Packer(default=encode_numpy, use_bin_type=True)

    def pack(self, obj: Any) -> bytes:
        try:
            return self._packer.pack(obj)
        except CodecError:
            self._packer.reset()
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            self._packer.reset()
            raise CodecError(f"encode: {exc}") from exc
