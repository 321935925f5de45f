"""Byte compatibility of the openpi numpy codec with the documented encoding.

The expected frames are assembled by hand from msgpack's format spec (fixmap 0x8N, fixstr 0xaN,
bin8 0xc4, true 0xc3, fixarray 0x9N, float64 0xcb), following openpi's msgpack_numpy: bin-typed map
keys in the order __ndarray__/data/dtype/shape, `dtype.str`, shape as an array.
"""

from __future__ import annotations

import struct

import msgpack
import numpy as np
import pytest

from spabench.errors import ProtocolError
from spabench.policy.codec_openpi import CodecError, Packer, packb, unpackb


def fixmap(n: int) -> bytes:
    return bytes([0x80 | n])


def fixarray(n: int) -> bytes:
    return bytes([0x90 | n])


def fixstr(text: str) -> bytes:
    raw = text.encode()
    return bytes([0xA0 | len(raw)]) + raw


def bin8(raw: bytes) -> bytes:
    return b"\xc4" + bytes([len(raw)]) + raw


TRUE = b"\xc3"


def ndarray_frame(data: bytes, dtype: str, shape: tuple[int, ...], keys=bin8) -> bytes:
    key = (lambda s: keys(s.encode())) if keys is bin8 else keys
    return (fixmap(4) + key("__ndarray__") + TRUE + key("data") + bin8(data) + key("dtype")
            + fixstr(dtype) + key("shape") + fixarray(len(shape)) + bytes(shape))


def test_array_frame_matches_the_documented_bytes():
    value = {"observation/state": np.array([1, 2, -3], dtype="<i2")}
    expected = fixmap(1) + fixstr("observation/state") + ndarray_frame(
        b"\x01\x00\x02\x00\xfd\xff", "<i2", (3,))
    assert packb(value) == expected
    assert Packer().pack(value) == expected


def test_image_frame_header_and_payload():
    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    assert packb(image) == ndarray_frame(image.tobytes(), "|u1", (2, 3, 3))


def test_numpy_scalar_frame_matches_the_documented_bytes():
    expected = (fixmap(3) + bin8(b"__npgeneric__") + TRUE + bin8(b"data") + b"\xcb"
                + struct.pack(">d", 1.5) + bin8(b"dtype") + fixstr("<f4"))
    assert packb(np.float32(1.5)) == expected


def test_plain_metadata_is_plain_msgpack():
    meta = {"action_horizon": 50, "reset_pose": [0.0, 1.5], "name": "pi05"}
    assert packb(meta) == msgpack.packb(meta, use_bin_type=True)
    assert unpackb(packb(meta)) == meta


def test_decodes_a_hand_built_openpi_frame():
    data = np.array([[0.5, -1.0], [2.0, 3.25]], dtype="<f4").tobytes()
    frame = fixmap(1) + fixstr("actions") + ndarray_frame(data, "<f4", (2, 2))
    decoded = unpackb(frame)
    assert decoded["actions"].dtype == np.float32
    np.testing.assert_array_equal(decoded["actions"], [[0.5, -1.0], [2.0, 3.25]])
    decoded["actions"][0, 0] = 7.0  # decoded arrays are writable copies


def test_decodes_text_keyed_variant():
    frame = ndarray_frame(np.array([9, 8], "<i4").tobytes(), "<i4", (2,), keys=fixstr)
    np.testing.assert_array_equal(unpackb(frame), [9, 8])


@pytest.mark.parametrize("value", [
    np.zeros((224, 224, 3), np.uint8),
    np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
    np.array([np.nan, np.inf, -np.inf]),
    np.array(1.0),
    np.array([True, False]),
    np.array(["asdf", "qwer"]),
    np.int64(-5),
    np.bool_(True),
    np.str_("asdf"),
    {"nested": {"arr": np.arange(4, dtype=np.int16)}, "list": [np.ones(2), "x", 3]},
])
def test_round_trip(value):
    back = unpackb(packb(value))

    def check(a, b):
        if isinstance(a, dict):
            assert set(a) == set(b)
            for k in a:
                check(a[k], b[k])
        elif isinstance(a, list):
            assert len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                check(x, y)
        elif isinstance(a, str):  # np.str_ is a str: msgpack carries it as text, as openpi does
            assert b == a
        elif isinstance(a, (np.ndarray, np.generic)):
            assert type(b) is type(a)
            assert b.dtype == a.dtype and np.shape(b) == np.shape(a)
            np.testing.assert_array_equal(b, a)
        else:
            assert a == b

    check(value, back)


@pytest.mark.parametrize("value", [
    np.array([1 + 2j]),
    np.array([object()], dtype=object),
    np.zeros(2, dtype=[("a", "<i4")]),
    np.complex64(1j),
])
def test_refuses_object_void_complex_on_encode(value):
    with pytest.raises(CodecError, match="not allowed"):
        packb({"x": value})


@pytest.mark.parametrize("dtype", ["|O", "<c16", "|V8"])
def test_refuses_object_void_complex_on_decode(dtype):
    frame = ndarray_frame(b"\x00" * 16, dtype, (1,))
    with pytest.raises(CodecError, match="not allowed"):
        unpackb(frame)


def test_rejects_data_length_mismatch_and_garbage():
    with pytest.raises(CodecError, match="needs 24 bytes"):
        unpackb(ndarray_frame(b"\x00" * 8, "<f8", (3,)))
    with pytest.raises(ProtocolError):
        unpackb(b"\xc1\xc1")
