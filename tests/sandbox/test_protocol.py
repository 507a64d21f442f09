"""The wire protocol: plain values round-trip exactly; anything else is refused on either end."""
from __future__ import annotations

import json
import math
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.sandbox import protocol
from autograder.sandbox.protocol import Caps, EncodeError, ProtocolError, decode, encode


def roundtrip(value, trusted=True):
    return decode(encode(value), trusted=trusted)


def payload(header, buffers=()):
    """A payload built by hand (to forge what a hostile child could send)."""
    h = json.dumps(header).encode()
    out = struct.pack("!I", len(h)) + h + b"\0" * (-(4 + len(h)) % 16)
    for b in buffers:
        out += b + b"\0" * (-len(b) % 16)
    return out


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**80, 1.5, -0.0, 1e-310, float("inf"), float("-inf"),
    1 + 2j, complex(float("inf"), -0.5), "", "héllo ✓ \udcff", [], (), {},
    [1, "a", None], (1, (2, (3,))), {"W_Q": 1.0, "nested": {"b": [1, 2]}},
])
def test_plain_values_round_trip_exactly(value):
    """Do Python scalars, strings and containers come back equal and of the same types?"""
    back = roundtrip(value)
    assert back == value and type(back) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)


def test_nan_round_trips():
    """Does a NaN float come back as a NaN float?"""
    assert math.isnan(roundtrip(float("nan")))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int8", "int64", "uint16", "uint64",
                                   "bool", "complex64", "complex128", ">f8", "<i4"])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 4), (8, 16, 64)])
def test_arrays_round_trip_with_dtype_and_shape(dtype, shape):
    """Do arrays keep dtype, shape and every bit of their values?"""
    rng = np.random.default_rng(0)
    a = np.asarray(rng.standard_normal(shape) * 100).astype(dtype)
    back = roundtrip(a)
    assert type(back) is np.ndarray
    assert back.dtype == a.dtype and back.dtype.str == a.dtype.str and back.shape == a.shape
    assert back.tobytes() == a.tobytes()


def test_arrays_with_special_floats_and_layouts_round_trip():
    """Do nan/inf entries, transposed and Fortran-ordered arrays come back value-equal?"""
    a = np.array([[np.nan, np.inf], [-np.inf, -0.0]])
    b = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    c = np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1)[::2]
    back = roundtrip([a, b, c])
    assert np.array_equal(back[0], a, equal_nan=True)
    assert np.array_equal(back[1], b) and np.array_equal(back[2], c)
    assert all(x.flags.writeable for x in back)


def test_numpy_scalars_keep_their_type():
    """Do np.float32 / np.int64 / np.bool_ scalars come back as the same numpy scalars?"""
    for s in (np.float32(1.25), np.int64(-3), np.bool_(True), np.float64(0.1), np.complex64(1j)):
        back = roundtrip(s)
        assert type(back) is type(s) and back == s


def test_messages_carry_mixed_arguments():
    """Does a call message with arrays inside a params dict come back intact?"""
    params = {"W_Q": np.eye(4, dtype=np.float32), "b": np.zeros(4)}
    msg = {"op": "call", "name": "pre_ln_block", "args": [np.ones((2, 4)), params], "kwargs": {"eps": 1e-5}}
    back = roundtrip(msg)
    assert back["args"][1]["W_Q"].dtype == np.float32
    assert np.array_equal(back["args"][1]["W_Q"], params["W_Q"]) and back["kwargs"] == {"eps": 1e-5}


@pytest.mark.parametrize("value, fragment", [
    (np.array([1, "a"], dtype=object), "dtype object"),
    (np.array(["ab"]), "dtype <U2"),
    (np.zeros(2, dtype=[("a", "f8")]), "dtype"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "dtype datetime64"),
    (np.ma.masked_array([1.0]), "MaskedArray (an ndarray subclass)"),
    ((i for i in range(2)), "a generator"),
    (lambda: 1, "callable"),
    ({1: 2}, "dict key of type int"),
    (type("F", (float,), {})(1.0), "F (a float subclass)"),
    (object(), "an object of type object"),
    (np.str_("x"), "numpy str_ scalar"),
])
def test_values_outside_the_plain_set_cannot_be_encoded(value, fragment):
    """Are objects, subclasses, generators and non-numeric arrays refused with a description?"""
    with pytest.raises(EncodeError) as info:
        encode(value)
    assert fragment in info.value.what


def test_encode_error_names_the_path_of_the_bad_element():
    """Does the error say where in a nested value the bad element sits?"""
    with pytest.raises(EncodeError) as info:
        encode((np.zeros(2), [1, np.ma.masked_array([1.0])]))
    assert info.value.path == "[1][1]"


@pytest.mark.parametrize("tree, buffers, fragment", [
    ([{"a": ["|O8", [1], 0]}, [8]], [b"\0" * 8], "dtype"),
    ([{"a": ["|V8", [1], 0]}, [8]], [b"\0" * 8], "dtype"),
    ([{"a": ["<M8", [1], 0]}, [8]], [b"\0" * 8], "dtype"),
    ([{"a": ["<U2", [1], 0]}, [8]], [b"\0" * 8], "dtype"),
    ([{"a": ["<f8", [2], 0]}, [8]], [b"\0" * 8], "needs 16 bytes"),
    ([{"a": ["<f8", [-1], 0]}, [8]], [b"\0" * 8], "non-negative"),
    ([{"a": ["<f8", [1], 1]}, [8]], [b"\0" * 8], "buffer reference"),
    ([[{"a": ["<f8", [1], 0]}, {"a": ["<f8", [1], 0]}], [8]], [b"\0" * 8], "buffer reference"),
    ([None, [8]], [b"\0" * 8], "unreferenced"),
    ([{"x": 1}, []], [], "unknown value tag"),
    ([{"t": [], "d": []}, []], [], "malformed"),
    ([{"d": [[1, 2]]}, []], [], "dict entry"),
    ([{"c": [1, "2"]}, []], [], "complex"),
    ([{"s": ["<f8", 0]}, [4]], [b"\0" * 4], "4 bytes"),
    # no bytes, yet dimensions no numpy array can have (numpy's reshape raises ValueError)
    ([{"a": ["<f8", [0, 2**62], 0]}, [0]], [b""], "shape"),
    ([{"a": ["<f8", [0, 2**64], 0]}, [0]], [b""], "shape"),
    ([{"a": ["<f8", [2**31, 2**31, 0], 0]}, [0]], [b""], "shape"),
])
def test_trusted_decoder_rejects_forged_values(tree, buffers, fragment):
    """Does the trusted decoder refuse bad dtypes, shape/byte mismatches and unknown tags?"""
    with pytest.raises(ProtocolError, match=fragment):
        decode(payload(tree[:1] + [tree[1]], buffers), trusted=True)


@pytest.mark.parametrize("data", [
    b"", b"\0\0", struct.pack("!I", 100) + b"[]",
    struct.pack("!I", 5) + b"[1,2" + b"\0" * 11,
    struct.pack("!I", 2) + b"\xff\xfe" + b"\0" * 10,
    payload([None, []]) + b"\0" * 16,
    payload([None, [100]]),
])
def test_trusted_decoder_rejects_malformed_framing(data):
    """Do truncated headers, bad JSON and stray bytes raise ProtocolError (not anything else)?"""
    with pytest.raises(ProtocolError):
        decode(data, trusted=True)


def test_nesting_depth_is_capped():
    """Is a deeply nested value refused by both encoder and trusted decoder?"""
    deep: list = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(EncodeError, match="nested deeper"):
        encode(deep, caps=protocol.TRUSTED_CAPS)
    with pytest.raises(ProtocolError, match="nested"):
        decode(encode(deep), trusted=True)
    very_deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ProtocolError):
        decode(payload_raw(very_deep), trusted=True)


def payload_raw(text: str) -> bytes:
    h = f"[{text},[]]".encode()
    return struct.pack("!I", len(h)) + h + b"\0" * (-(4 + len(h)) % 16)


def test_sizes_are_capped():
    """Are too much array data and too many values refused by the trusted decoder?"""
    small = Caps(max_bytes=1000, max_items=50)
    with pytest.raises(ProtocolError, match="MB of array data"):
        decode(encode(np.zeros(200)), trusted=True, caps=small)
    with pytest.raises(ProtocolError, match="values"):
        decode(encode(list(range(100))), trusted=True, caps=small)
    with pytest.raises(EncodeError, match="MB of array data"):
        encode(np.zeros(200), caps=small)


def test_a_header_listing_more_buffers_than_values_is_refused():
    """Is a payload listing more buffers than a message may hold values refused, and one listing
    unreferenced empty buffers refused as well (each buffer is sliced only when a value refers to
    it: a 4 MB header of zeros was 440 MB of memoryviews in the grader)?"""
    caps = Caps(max_items=1000)
    with pytest.raises(ProtocolError, match="more than 1000 buffers"):
        decode(payload([None, [0] * 1001], [b""] * 1001), trusted=True, caps=caps)
    with pytest.raises(ProtocolError, match="unreferenced"):
        decode(payload([None, [0] * 1000], [b""] * 1000), trusted=True, caps=caps)
    tree = [{"s": ["<f8", i]} for i in range(3)] + [{"a": ["<i4", [0, 5], 3]}]
    value = decode(payload([tree, [8, 8, 8, 0]], [np.float64(i).tobytes() for i in range(3)] + [b""]),
                   trusted=True, caps=caps)
    assert value[:3] == [0.0, 1.0, 2.0] and value[3].shape == (0, 5)


def test_plain_values_in_lists_and_tuples_count_against_the_cap_on_both_ends():
    """Do the plain elements of lists and tuples (read without a call per element) count as values,
    exactly as elsewhere: a message of N values passes a cap of N and fails one of N - 1, and
    comes back as it was sent?"""
    message = {"op": "result", "v": [1, "a", None, True, 2.5, [3], (4, 5.5), [], ()]}
    # the dict, its two values, the list's nine elements and the three inside them: 15 values
    assert decode(encode(message, caps=Caps(max_items=15)), trusted=True, caps=Caps(max_items=15)) == message
    with pytest.raises(EncodeError, match="more than 14 values"):
        encode(message, caps=Caps(max_items=14))
    with pytest.raises(ProtocolError, match="more than 14 values"):
        decode(encode(message), trusted=True, caps=Caps(max_items=14))


def test_plain_values_in_a_dict_count_against_the_cap_on_both_ends():
    """Do a dict's plain values (read without a call per value) count as values, exactly as
    elsewhere: a message of N values passes a cap of N and fails one of N - 1?"""
    message = {"op": "result", "value": 1.5, "note": None, "ok": True, "n": 3, "x": np.zeros(3), "s": ""}
    # the dict and its seven values (the array one of them): 8 values
    assert decode(encode(message, caps=Caps(max_items=8)), trusted=True, caps=Caps(max_items=8))["n"] == 3
    with pytest.raises(EncodeError, match="more than 7 values"):
        encode(message, caps=Caps(max_items=7))
    with pytest.raises(ProtocolError, match="more than 7 values"):
        decode(encode(message), trusted=True, caps=Caps(max_items=7))


def test_a_frame_is_its_length_and_the_payload():
    """Is a frame the payload's length (8 bytes, big-endian) followed by the payload, every
    buffer padded to 16 bytes?"""
    for value in ({"op": "call", "args": [np.arange(3.0), np.ones((2, 3), dtype=np.float32)]}, [1, "x"], None,
                  {"op": "x", "value": np.zeros(0)}):
        data = encode(value)
        assert protocol.frame(value) == struct.pack("!Q", len(data)) + data
        assert len(data) % 16 == 0


def test_framing_a_c_ordered_array_copies_its_bytes_once():
    """Does a frame take a C-ordered array's bytes straight from the array (one copy, into the
    frame: the requests carry megabytes of arguments per submission), and do the arrays of other
    layouts still arrive as they were?"""
    big = np.arange(2**20, dtype=np.float64)            # 8 MB
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        data = protocol.frame({"op": "call", "args": [big]})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.25 * big.nbytes
    assert np.array_equal(decode(data[8:], trusted=True)["args"][0], big)
    square = np.arange(12.0).reshape(3, 4)
    for arr in (square.T, square[:, ::2], np.asfortranarray(square), square[1:]):
        back = decode(protocol.frame({"op": "x", "v": arr})[8:], trusted=True)["v"]
        assert back.shape == arr.shape and np.array_equal(back, arr) and back.flags.c_contiguous


def test_channel_frames_messages_over_a_socket():
    """Do messages cross a socketpair intact, and does the reader see EOF when the writer closes?"""
    a, b = socket.socketpair()
    ca, cb = protocol.Channel(a), protocol.Channel(b)
    x = np.arange(1000.0).reshape(10, 100)
    ca.send({"op": "call", "args": [x]})
    ca.send({"op": "ping"})
    assert np.array_equal(cb.recv(trusted=True)["args"][0], x)
    assert cb.recv(trusted=True) == {"op": "ping"}
    ca.close()
    with pytest.raises(EOFError):
        cb.recv(trusted=True)
    cb.close()


def test_a_read_ahead_channel_gives_the_messages_a_plain_channel_gives():
    """Do messages sent back to back (small, larger than the read-ahead buffer, split across
    buffer fills) reach a read-ahead channel intact and in order, with writable arrays?"""
    a, b = socket.socketpair()
    ca, cb = protocol.Channel(a), protocol.Channel(b, read_ahead=True)
    small = np.arange(12.0).reshape(3, 4)
    big = np.arange(protocol.READ_AHEAD // 4, dtype=np.float64)          # twice the buffer
    almost = np.zeros(protocol.READ_AHEAD // 8 - 40)                     # just fits with its header
    sent = [{"op": "r", "value": v} for v in (small, big, 1, almost, small, "x" * 5000, almost, big)]
    writer = threading.Thread(target=lambda: [ca.send(m) for m in sent])
    writer.start()
    got = [cb.recv(trusted=True, deadline=time.monotonic() + 10) for _ in sent]
    writer.join()
    for want, have in zip(sent, got):
        if isinstance(want["value"], np.ndarray):
            assert np.array_equal(have["value"], want["value"])
            have["value"][...] = 0                                     # writable, and no other message's data
        else:
            assert have == want
    assert np.array_equal(got[4]["value"], np.zeros((3, 4)))
    assert np.array_equal(got[0]["value"], np.zeros((3, 4)))
    ca.close()
    with pytest.raises(EOFError):
        cb.recv(trusted=True, deadline=time.monotonic() + 5)
    cb.close()


def test_a_read_ahead_channel_keeps_the_limits_and_the_deadline():
    """Is an oversized frame refused before it is read, a half-sent frame a timeout, and are
    descriptors refused on a read-ahead channel?"""
    a, b = socket.socketpair()
    cb = protocol.Channel(b, read_ahead=True)
    a.sendall(struct.pack("!Q", 2**60))
    with pytest.raises(ProtocolError, match="exceeds"):
        cb.recv(trusted=True, deadline=time.monotonic() + 1)
    a2, b2 = socket.socketpair()
    half = protocol.frame({"op": "x", "value": np.zeros(100)})
    a2.sendall(half[: len(half) // 2])
    with pytest.raises(TimeoutError):
        protocol.Channel(b2, read_ahead=True).recv(trusted=True, deadline=time.monotonic() + 0.2)
    with pytest.raises(ProtocolError, match="descriptors"):
        cb.recv_fds(1, deadline=time.monotonic() + 1)
    for s in (a, b, a2, b2):
        s.close()


def test_channel_read_honours_the_deadline():
    """Does a read with a deadline raise TimeoutError instead of waiting forever?"""
    a, b = socket.socketpair()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        protocol.Channel(b).recv(trusted=True, deadline=time.monotonic() + 0.2)
    assert time.monotonic() - started < 5.0
    a.close()
    b.close()


def test_channel_refuses_an_oversized_frame_before_reading_it():
    """Is a frame announcing 2**60 bytes refused at once (no allocation, no wait)?"""
    a, b = socket.socketpair()
    a.sendall(struct.pack("!Q", 2**60))
    with pytest.raises(ProtocolError, match="exceeds"):
        protocol.Channel(b).recv(trusted=True, deadline=time.monotonic() + 1)
    a.close()
    b.close()


def test_channel_requires_a_dict_with_an_op():
    """Is a well-formed value that is not a message refused?"""
    a, b = socket.socketpair()
    a.sendall(protocol.frame([1, 2]))
    with pytest.raises(ProtocolError, match="op"):
        protocol.Channel(b).recv(trusted=True)
    a.close()
    b.close()


def test_descriptors_cross_a_channel_between_messages():
    """Do file descriptors sent with send_fds arrive (usable) between two framed messages?"""
    a, b = socket.socketpair()
    ca, cb = protocol.Channel(a), protocol.Channel(b)
    r, w = os.pipe()
    ca.send({"op": "fork"})
    ca.send_fds([w])
    ca.send({"op": "after"})
    assert cb.recv(trusted=True) == {"op": "fork"}
    (got,) = cb.recv_fds(1)
    assert got != w
    os.write(got, b"through")
    assert os.read(r, 7) == b"through"
    assert cb.recv(trusted=True) == {"op": "after"}
    for fd in (r, w, got):
        os.close(fd)
    ca.close()
    with pytest.raises(EOFError):
        cb.recv_fds(1)
    cb.close()


def test_a_message_where_descriptors_were_expected_is_refused():
    """Is a plain frame read with recv_fds a ProtocolError, not a hang or a silent success?"""
    a, b = socket.socketpair()
    protocol.Channel(a).send({"op": "x"})
    with pytest.raises(ProtocolError, match="descriptor"):
        protocol.Channel(b).recv_fds(1, deadline=time.monotonic() + 5)
    a.close()
    b.close()


def test_the_sandbox_side_imports_only_stdlib_numpy_and_its_own_modules():
    """Does importing the zygote and the child pull in nothing from the grading side, and is
    every engine module they import in the sandbox's allow-list?"""
    from autograder.sandbox.isolation import CHILD_MODULES, ENGINE_MODULES

    code = ("import sys; import autograder.sandbox.zygote, autograder.sandbox.child; "
            "print(sorted(m for m in sys.modules if m.startswith('autograder')))")
    out = subprocess.run([sys.executable, "-s", "-P", "-c", code], capture_output=True, text=True, check=True)
    expected = sorted(["autograder", "autograder.sandbox"] +
                      [f"autograder.{m[:-3]}" for m in ENGINE_MODULES if m != "__init__.py"] +
                      [f"autograder.sandbox.{m[:-3]}" for m in CHILD_MODULES if m != "__init__.py"])
    assert out.stdout.strip() == str(expected)


JSON_TREES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.builds(lambda pairs: {"d": pairs},
                                                           st.lists(st.tuples(st.text(), inner).map(list), max_size=3)),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSON_TREES)
def test_headers_are_what_json_itself_writes_and_reads(tree):
    """Does the header encoder (json's C encoder called straight) write exactly what json's own
    encoder with the protocol's settings writes, and does the header reader give what json.loads
    gives, on any JSON tree?"""
    expected = json.JSONEncoder(allow_nan=True, separators=(",", ":"), check_circular=False).encode(tree)
    assert protocol._json_encode(tree) == expected
    assert repr(protocol._loads(expected)) == repr(json.loads(expected))


@pytest.mark.parametrize("text", ["", " ", "[1,", "[1] x", "x", "[1]]", "[01]", "nul", " [1] ", "[NaN]", '["\\ud800"]'])
def test_the_header_reader_accepts_and_refuses_what_json_loads_does(text):
    """Does the header reader accept what json.loads accepts (surrounding whitespace included)
    and refuse with json's own error, at the same place, what it refuses?"""
    def outcome(loads):
        try:
            return "value", repr(loads(text))
        except json.JSONDecodeError as exc:
            return "error", str(exc)
    assert outcome(protocol._loads) == outcome(json.loads)
