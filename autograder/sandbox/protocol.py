"""The wire protocol between the trusted process and the sandboxed child: plain data only.

A frame is an 8-byte big-endian payload length followed by the payload. A payload is

    4-byte big-endian header length | JSON header | padding to 16 | buffer 0 | pad | buffer 1 | ...

The JSON header is `[value_tree, [len(buffer 0), len(buffer 1), ...]]`. In the value tree, JSON
null/true/false/numbers/strings/arrays stand for None/bool/int/float/str/list; every JSON object
is a tag with exactly one key:

    {"t": [...]}                     tuple
    {"d": [[key, value], ...]}       dict with str keys
    {"c": [real, imag]}              complex
    {"a": [dtype, [shape], i]}       ndarray: dtype.str (bool/int/uint/float/complex only),
                                     C-order bytes in buffer i
    {"s": [dtype, i]}                numpy scalar of such a dtype (np.float32(1.5), np.int64(3))

Floats keep their exact value (repr round-trips), including nan and +-inf. Nothing is pickled
or evaluated: decoding builds values with `json.loads` and `np.frombuffer` only.

`decode(data, trusted=True)` is what the trusted process applies to the child's data: every tag,
dtype and shape is checked against the buffers, and sizes and nesting are capped; anything else
raises `ProtocolError`. The child decodes the trusted side's requests with `trusted=False`
(the same checks, without the size caps).

This module is imported by the sandboxed child, next to student code that may have replaced
functions in numpy, json or builtins: it keeps private references to everything it uses.
"""
from __future__ import annotations

import builtins as _builtins_module

# Functions defined below look builtins up in this private copy, so student code that
# rebinds `builtins.len` or `builtins.isinstance` cannot change how messages are framed.
__builtins__ = dict(vars(_builtins_module))  # type: ignore[assignment]

import _socket
import json
import os
import re
import select
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.text import plural, with_article

__all__ = [
    "Caps", "TRUSTED_CAPS", "UNCAPPED", "ProtocolError", "EncodeError",
    "encode", "decode", "frame", "Channel", "describe", "READ_AHEAD", "FORK_REQUEST", "REAP_REQUEST",
]

_JSONDecodeError = json.JSONDecodeError


def _json_functions() -> tuple[Callable[[Any], str], Callable[[str], Any]]:
    """(encode, loads) for headers: what json's encoder and json.loads give, calling the C encoder
    and scanner straight (made once here) instead of through json's Python-level wrappers, which
    build a new encoder per message and run three Python functions per decode: fewer steps per
    message on both sides, and fewer pages a fresh problem process writes. Falls back to the
    wrappers where the C parts are missing or give anything else on a sample."""
    # The tree given to JSON is built afresh by _Encoder, with its depth capped: it cannot hold a
    # cycle, so the encoder's bookkeeping of the containers it is inside (a third of its time
    # here) is skipped.
    encoder = json.JSONEncoder(allow_nan=True, separators=(",", ":"), check_circular=False)
    decoder = json.JSONDecoder()
    scan = decoder.scan_once                    # type: ignore[attr-defined]  # set by __init__, not in the stubs
    space = json.decoder.WHITESPACE.match       # type: ignore[attr-defined]  # what decode() skips

    def loads(text: str) -> Any:
        """json.loads(text) for a str (json.decoder.JSONDecoder.decode and raw_decode, inlined)."""
        try:
            value, end = scan(text, space(text, 0).end())
        except StopIteration as exc:
            raise _JSONDecodeError("Expecting value", text, exc.value) from None
        end = space(text, end).end()
        if end != len(text):
            raise _JSONDecodeError("Extra data", text, end)
        return value

    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode, loads

    def encode(value: Any) -> str:
        return "".join(c_encoder(value, 0))

    sample = [[1, -2.5, float("inf"), float("nan"), None, True, "é\u2028\"\n", {"d": [["k", [1e300, 5e-324]]]}], [16]]
    try:
        c_encoder = make(None, encoder.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False,
                         True)
        same = encode(sample) == encoder.encode(sample)
    except Exception:  # noqa: BLE001 - another Python's C encoder (other arguments): keep the wrapper
        same = False
    return (encode if same else encoder.encode), loads


_json_encode, _loads = _json_functions()
_monotonic = time.monotonic
_ndarray = np.ndarray
_generic = np.generic
_np_dtype = np.dtype
_frombuffer = np.frombuffer
_DTYPE_RE = re.compile(r"[<>|=]?[biufc][0-9]{1,2}")
_fullmatch = _DTYPE_RE.fullmatch
_NUMERIC_KINDS = "biufc"
_ALIGN = 16
READ_AHEAD = 64 * 1024       # bytes a read-ahead channel reads at once (see Channel)
_LEN = struct.Struct("!Q")
_HLEN = struct.Struct("!I")
_TAGS = ("t", "d", "c", "a", "s")
_BAD_SHAPE = "array shape must be a list of at most 32 non-negative integers"


class ProtocolError(Exception):
    """Data from the other side is not a valid message (bad framing, tag, dtype, shape or size)."""


class EncodeError(TypeError):
    """A value cannot be sent: `what` describes it for the student, e.g. 'a generator'."""

    def __init__(self, what: str, path: str = ""):
        self.what = what
        self.path = path
        super().__init__(f"{path}: {what}" if path else what)

    def within(self, step: str) -> EncodeError:
        """The same error, one container further out (`step` is e.g. "[2]" or "['key']")."""
        return EncodeError(self.what, step + self.path)


@dataclass(frozen=True)
class Caps:
    """Upper bounds applied when decoding (and encoding) one message."""
    max_bytes: int = 256 * 2**20     # array buffers of one message, all together
    max_header: int = 32 * 2**20     # the JSON header
    max_depth: int = 32              # nesting of lists/tuples/dicts
    max_items: int = 1_000_000       # values in one message

    @property
    def max_frame(self) -> int:
        return self.max_bytes + self.max_header + 4 + _ALIGN * 2


TRUSTED_CAPS = Caps()
UNCAPPED = Caps(max_bytes=2**62, max_header=2**40, max_depth=100, max_items=2**62)


def _pad(n: int) -> int:
    return -n % _ALIGN


# --------------------------------------------------------------------------- encoding

def describe(value: Any) -> str:
    """A short, student-readable description of a value that cannot cross the wire."""
    t = type(value)
    name = getattr(t, "__name__", "object")
    name = name if type(name) is str else "object"
    name = name[:80]
    if isinstance(value, _ndarray):
        if t is not _ndarray:
            return f"{with_article(name)} (an ndarray subclass); return a plain numpy array, e.g. np.asarray(result)"
        return (f"an array of dtype {value.dtype}; return an array of numbers "
                f"(bool, int or float), not of {(value.dtype.kind == 'O' and 'Python objects') or value.dtype}")
    if isinstance(value, _generic):
        return f"a numpy {name} scalar; return a number or an array of numbers"
    if name == "generator" or name == "coroutine" or name == "async_generator":
        return f"{with_article(name)}; return the values themselves, e.g. a numpy array, not {with_article(name)}"
    for base in (bool, int, float, complex, str, list, tuple, dict):
        if isinstance(value, base):
            return f"{with_article(name)} (a {base.__name__} subclass); return a plain {base.__name__}"
    try:
        array_like = hasattr(value, "__array__")
    except Exception:  # noqa: BLE001 - a value's own __getattr__ may raise anything
        array_like = False
    if array_like:
        return (f"an object of type {name} (array-like, but not a numpy array); "
                f"return a numpy array, e.g. np.asarray(result)")
    if callable(value):
        return f"a function or other callable ({name}); return its result instead"
    return f"an object of type {name}; return a numpy array or a number"


class _Encoder:
    """Builds the JSON tree and the buffer list. Paths (for the error message) are put together
    only when a value is refused: each container adds its own step as the error passes up."""

    def __init__(self, caps: Caps):
        self.caps = caps
        self.buffers: list[Any] = []          # bytes, or a C-ordered array standing for its own bytes
        self.lengths: list[int] = []          # bytes in each
        self.nbytes = 0
        self.items = 0

    def value(self, obj: Any, depth: int) -> Any:
        self.items += 1
        if self.items > self.caps.max_items:
            raise EncodeError(f"more than {self.caps.max_items} values")
        t = type(obj)
        if t is _ndarray:                     # the usual argument and result first
            return self.array(obj)
        if obj is None or t is bool or t is str or t is float:
            return obj
        if t is int:
            if obj.bit_length() > 4096:
                raise EncodeError("an integer with more than 4096 bits")
            return obj
        if t is list or t is tuple or t is dict:
            if depth >= self.caps.max_depth:
                raise EncodeError(f"nested deeper than {self.caps.max_depth} levels")
            if t is dict:
                return {"d": self.pairs(obj, depth + 1)}
            out = self.items_of(obj, depth + 1)
            return out if t is list else {"t": out}
        if t is complex:
            return {"c": [obj.real, obj.imag]}
        if isinstance(obj, _generic) and t.__module__ == "numpy":
            dt = obj.dtype
            if dt.kind not in _NUMERIC_KINDS:
                raise EncodeError(describe(obj))
            return {"s": [dt.str, self.buffer(obj.tobytes())]}
        raise EncodeError(describe(obj))

    def items_of(self, seq: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        out = []
        value = self.value
        for x in seq:
            try:
                out.append(value(x, depth))
            except EncodeError as exc:
                raise exc.within(f"[{len(out)}]") from None
        return out

    def pairs(self, obj: dict[Any, Any], depth: int) -> list[Any]:
        out = []
        value = self.value
        for k, v in obj.items():
            if type(k) is not str:
                raise EncodeError(f"a dict key of type {type(k).__name__}; use str keys")
            t = type(v)
            if t is str or t is float or v is None or t is bool:    # a plain value, as self.value takes it
                self.items += 1
                if self.items > self.caps.max_items:
                    raise EncodeError(f"more than {self.caps.max_items} values").within(f"[{k!r}]")
                out.append([k, v])
                continue
            try:
                out.append([k, value(v, depth)])
            except EncodeError as exc:
                raise exc.within(f"[{k!r}]") from None
        return out

    def array(self, arr: np.ndarray) -> Any:
        dt = arr.dtype
        code = _ENCODABLE.get(dt)
        if code is None:
            if dt.kind not in _NUMERIC_KINDS or dt.fields is not None or dt.subdtype is not None:
                raise EncodeError(describe(arr))
            code = _ENCODABLE[dt] = dt.str
        shape = arr.shape
        if len(shape) > 32:
            raise EncodeError(f"an array with {len(shape)} dimensions")
        size = arr.nbytes
        if size + self.nbytes > self.caps.max_bytes:     # before any copy
            raise EncodeError(f"more than {self.caps.max_bytes // 2**20} MB of array data")
        self.nbytes += size
        # A C-ordered array goes into the frame as it is: its bytes are copied once, when the
        # frame is joined (before frame() returns), instead of into a bytes object first.
        self.buffers.append(arr if arr.flags.c_contiguous else arr.tobytes(order="C"))
        self.lengths.append(size)
        # the shape as a tuple: JSON writes it as a list all the same
        return {"a": [code, shape, len(self.lengths) - 1]}

    def buffer(self, data: bytes) -> int:
        self.nbytes += len(data)
        if self.nbytes > self.caps.max_bytes:
            raise EncodeError(f"more than {self.caps.max_bytes // 2**20} MB of array data")
        self.buffers.append(data)
        self.lengths.append(len(data))
        return len(self.lengths) - 1


_ENCODABLE: dict[np.dtype, str] = {}  # numeric dtypes already checked -> their code (dtype.str)


def _encode_parts(obj: Any, caps: Caps) -> list[Any]:
    """The frame's pieces: its length prefix (first), the header and each buffer, padded (bytes, or
    C-ordered arrays whose memory is joined as it is)."""
    enc = _Encoder(caps)
    tree = enc.value(obj, 0)
    lengths = enc.lengths
    header = _json_encode([tree, lengths]).encode("ascii")
    if len(header) > caps.max_header:
        raise EncodeError(f"more than {caps.max_header // 2**20} MB of non-array data")
    parts = [b"", _HLEN.pack(len(header)), header, _PADDING[_pad(4 + len(header))]]
    total = 4 + len(header) + len(parts[3])
    for b, n in zip(enc.buffers, lengths):
        pad = _PADDING[-n % _ALIGN]
        parts.append(b)
        parts.append(pad)
        total += n + len(pad)
    parts[0] = _LEN.pack(total)
    return parts


_PADDING = tuple(b"\0" * n for n in range(_ALIGN))


def encode(obj: Any, *, caps: Caps = UNCAPPED) -> bytes:
    """The payload for `obj` (no frame length). Raises EncodeError for values outside the set."""
    parts = _encode_parts(obj, caps)
    parts[0] = b""
    return b"".join(parts)


def frame(obj: Any, *, caps: Caps = UNCAPPED) -> bytes:
    """Length prefix plus payload, ready to write."""
    return b"".join(_encode_parts(obj, caps))


# --------------------------------------------------------------------------- decoding

_DTYPES: dict[str, np.dtype] = {}     # dtype codes already checked (at most a few hundred can pass)


def _check_dtype(code: Any) -> np.dtype:
    if type(code) is str:
        known = _DTYPES.get(code)
        if known is not None:
            return known
    dt = _new_dtype(code)
    _DTYPES[code] = dt
    return dt


def _new_dtype(code: Any) -> np.dtype:
    if type(code) is not str or not _fullmatch(code):
        raise ProtocolError(f"array dtype {str(code)[:40]!r} is not a bool/int/uint/float/complex dtype")
    try:
        dt = _np_dtype(code)
    except TypeError as exc:
        raise ProtocolError(f"array dtype {code!r} is not valid: {exc}") from None
    if dt.kind not in _NUMERIC_KINDS or dt.fields is not None or dt.subdtype is not None:
        raise ProtocolError(f"array dtype {code!r} is not a bool/int/uint/float/complex dtype")
    return dt


class _Decoder:
    """Buffer i is view[starts[i]:starts[i] + lengths[i]], sliced only when a value refers to it:
    a header may list many empty buffers, and a memoryview made for each up front would cost the
    trusted side ~200 bytes apiece (a 4 MB header of zeros: ~400 MB) before the message is refused."""

    def __init__(self, view: memoryview, starts: list[int], lengths: list[int], caps: Caps):
        self.view = view
        self.starts = starts
        self.lengths = lengths
        self.used = bytearray(len(lengths))
        self.unused = len(lengths)
        self.caps = caps
        self.items = 0

    def claim(self, index: Any) -> int:
        """Buffer `index` taken by a value (each buffer is taken once): where it starts in the view."""
        if type(index) is not int or not 0 <= index < len(self.lengths) or self.used[index]:
            raise ProtocolError(f"bad buffer reference {str(index)[:20]}")
        self.used[index] = 1
        self.unused -= 1
        return self.starts[index]

    def buffer(self, index: Any) -> memoryview:
        start = self.claim(index)
        return self.view[start:start + self.lengths[index]]

    def value(self, node: Any, depth: int) -> Any:
        self.items += 1
        if self.items > self.caps.max_items:
            raise ProtocolError(f"more than {self.caps.max_items} values in one message")
        t = type(node)
        if node is None or t is bool or t is int or t is float or t is str:
            return node
        if depth >= self.caps.max_depth:
            raise ProtocolError(f"values nested deeper than {self.caps.max_depth} levels")
        if t is list:
            return self.items_of(node, depth + 1)
        if t is not dict or len(node) != 1:
            raise ProtocolError("malformed value tag")
        (tag, body), = node.items()
        if tag not in _TAGS or type(body) is not list:
            raise ProtocolError(f"unknown value tag {str(tag)[:20]!r}")
        if tag == "a":
            return self.array(body)
        if tag == "t":
            return tuple(self.items_of(body, depth + 1))
        if tag == "d":
            keys = []
            items = []
            for pair in body:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                    raise ProtocolError("malformed dict entry")
                keys.append(pair[0])
                items.append(pair[1])
            return dict(zip(keys, self.items_of(items, depth + 1)))
        if tag == "c":
            if len(body) != 2 or any(type(x) not in (int, float) for x in body):
                raise ProtocolError("malformed complex number")
            return complex(float(body[0]), float(body[1]))
        if tag == "s":
            if len(body) != 2:
                raise ProtocolError("malformed numpy scalar")
            dt = _check_dtype(body[0])
            buf = self.buffer(body[1])
            if len(buf) != dt.itemsize:
                raise ProtocolError(f"numpy scalar of dtype {dt.str} with {len(buf)} bytes")
            return _frombuffer(buf, dtype=dt)[0]
        raise AssertionError(tag)             # every tag of _TAGS is handled above

    def items_of(self, node: list[Any], depth: int) -> list[Any]:
        """The elements of a list or tuple, or a dict's values: plain values counted and kept here,
        as self.value counts and returns them (most elements are numbers and strings), the rest
        through it."""
        out = []
        value = self.value
        for x in node:
            kind = type(x)
            if kind is str or kind is int or kind is float or x is None or kind is bool:
                self.items += 1
                if self.items > self.caps.max_items:
                    raise ProtocolError(f"more than {self.caps.max_items} values in one message")
                out.append(x)
            elif kind is list and not x and depth < self.caps.max_depth:
                # an empty list (a reply's warnings and mutated arguments, mostly), as self.value takes it
                self.items += 1
                if self.items > self.caps.max_items:
                    raise ProtocolError(f"more than {self.caps.max_items} values in one message")
                out.append([])
            else:
                out.append(value(x, depth))
        return out

    def array(self, body: list[Any]) -> np.ndarray:
        if len(body) != 3:
            raise ProtocolError("malformed array")
        dt = _check_dtype(body[0])
        shape = body[1]
        if type(shape) is not list or len(shape) > 32:
            raise ProtocolError(_BAD_SHAPE)
        count = 1
        for n in shape:
            if type(n) is not int or n < 0:
                raise ProtocolError(_BAD_SHAPE)
            count *= n
        start = self.claim(body[2])
        size = self.lengths[body[2]]
        if count * dt.itemsize != size:
            raise ProtocolError(f"array of shape {tuple(shape)} and dtype {dt.str} needs "
                                f"{count * dt.itemsize} bytes, got {size}")
        try:
            # One step, straight on the message's memory: the same array as frombuffer() on a slice
            # of the view and then reshape(), without the two objects in between (a third of the
            # time per array; a batch of calls carries hundreds of arrays).
            return _ndarray(shape, dt, self.view, start)
        except ValueError as exc:       # no bytes, yet dimensions no array can have, e.g. (0, 2**62)
            raise ProtocolError(f"array of shape {str(tuple(shape))[:80]}: {exc}") from None


def decode(data: bytes | bytearray | memoryview, *, trusted: bool, caps: Caps | None = None) -> Any:
    """The value in one payload. `trusted=True`: caps enforced (data comes from the child)."""
    caps = caps or (TRUSTED_CAPS if trusted else UNCAPPED)
    kind = type(data)
    if kind is bytes:
        data = bytearray(data)          # arrays handed out are writable
    # a bytearray's view is already one of bytes; anything else is cast to one
    view = memoryview(data) if kind is bytes or kind is bytearray else memoryview(data).cast("B")
    size = len(view)
    if size < 4:
        raise ProtocolError("message shorter than its header length")
    (hlen,) = _HLEN.unpack_from(view, 0)
    if hlen > caps.max_header or 4 + hlen > size:
        raise ProtocolError(f"header of {hlen} bytes does not fit the message")
    try:
        header = _loads(str(view[4:4 + hlen], "ascii"))
    except (UnicodeDecodeError, _JSONDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"header is not valid JSON: {str(exc)[:100]}") from None
    if type(header) is not list or len(header) != 2 or type(header[1]) is not list:
        raise ProtocolError("header is not [value, buffer lengths]")
    tree, lengths = header
    if len(lengths) > caps.max_items:           # each buffer is a value's (counted in max_items)
        raise ProtocolError(f"more than {caps.max_items} buffers in one message")
    offset = 4 + hlen + -(4 + hlen) % _ALIGN
    starts = []
    for n in lengths:
        if type(n) is not int or n < 0 or offset + n > size:
            raise ProtocolError("buffer lengths do not match the message")
        starts.append(offset)
        offset += n + -n % _ALIGN
    if offset != size:
        raise ProtocolError(f"message has {size - offset} bytes beyond its buffers")
    if sum(lengths) > caps.max_bytes:
        raise ProtocolError(f"more than {caps.max_bytes // 2**20} MB of array data")
    dec = _Decoder(view, starts, lengths, caps)
    try:
        value = dec.value(tree, 0)
    except RecursionError:
        raise ProtocolError("values nested too deeply") from None
    if dec.unused:
        raise ProtocolError("message carries unreferenced buffers")
    return value


# --------------------------------------------------------------------------- framing

class Channel:
    """One end of a stream socket carrying framed messages (dicts with an "op" key).

    It calls the C methods of `_socket.socket` captured when this module was imported, so later
    changes to the `socket` module or class (by student code in the child) cannot affect it.
    The socket is non-blocking: reads and writes are tried at once and only when the other end
    is not ready does the channel wait (poll) for it, until the deadline.

    With `read_ahead` (the trusted side's channel to a problem process, which never receives
    descriptors), a read waits first and then takes whatever has arrived into a buffer of
    READ_AHEAD bytes: a reply's length and payload, and the next replies of a batch, in one
    system call instead of a failed try, a wait and two reads. The frames and their checks are
    the same; a frame larger than the buffer is read into its own.
    """

    def __init__(self, sock: _socket.socket, *, read_ahead: bool = False):
        self.sock = sock
        _sock_settimeout(sock, 0.0)
        self._ahead = bytearray(READ_AHEAD) if read_ahead else None
        self._start = self._end = 0          # the bytes read ahead and not used yet: _ahead[_start:_end]
        self._pollers: dict[int, Any] = {}    # one poll object per kind of wait, kept for the channel's life
        self.last_size = 0                    # bytes of the last message read (its payload)

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        """A channel on an inherited or received socket descriptor: one end of a socketpair, so
        its family and type are given rather than asked of the kernel (three system calls and
        their objects, in every problem process)."""
        return cls(_Socket(_AF_UNIX, _SOCK_STREAM, 0, fd))

    def fileno(self) -> int:
        return _sock_fileno(self.sock)

    def send(self, message: dict[str, Any], *, deadline: float | None = None, caps: Caps = UNCAPPED) -> None:
        """Write one message; raises TimeoutError past `deadline` (time.monotonic())."""
        self._write(frame(message, caps=caps), deadline)

    def send_frame(self, data: bytes, *, deadline: float | None = None) -> None:
        """Write bytes made by `frame()`."""
        self._write(data, deadline)

    def recv(self, *, trusted: bool, deadline: float | None = None, caps: Caps | None = None) -> dict[str, Any]:
        """Read one message. Raises EOFError when the other end closed, TimeoutError past
        `deadline`, ProtocolError for malformed data (the stream is then out of step)."""
        caps = caps or (TRUSTED_CAPS if trusted else UNCAPPED)
        if self._ahead is not None:
            payload = self._read_frame(caps.max_frame, deadline)
        else:
            head = self._read(_LEN.size, deadline)
            (n,) = _LEN.unpack_from(head, 0)
            if n > caps.max_frame:
                raise ProtocolError(f"message of {n} bytes exceeds the limit of {caps.max_frame} bytes")
            payload = self._read(n, deadline)
        self.last_size = len(payload)
        message = decode(payload, trusted=trusted, caps=caps)
        if type(message) is not dict or type(message.get("op")) is not str:
            raise ProtocolError("message is not a dict with an 'op'")
        return message

    @staticmethod
    def _check(deadline: float | None) -> None:
        if deadline is not None and deadline - _monotonic() <= 0:
            raise TimeoutError("deadline passed")

    def _wait(self, events: int, deadline: float | None) -> None:
        """Until the socket is ready for `events` (TimeoutError past the deadline)."""
        if deadline is None:
            wait = -1
        else:
            left = deadline - _monotonic()
            if left <= 0:
                raise TimeoutError("deadline passed")
            wait = int(left * 1000) + 1
        poller = self._pollers.get(events)
        if poller is None:
            poller = self._pollers[events] = _poll()
            poller.register(_sock_fileno(self.sock), events)
        if not poller.poll(wait):
            self._check(deadline)

    def _write(self, data: bytes, deadline: float | None) -> None:
        view = memoryview(data)
        total = len(view)
        sent = 0
        while sent < total:
            self._check(deadline)
            try:
                sent += _sock_send(self.sock, view[sent:])
            except BlockingIOError:
                self._wait(_POLLOUT, deadline)

    def _read(self, n: int, deadline: float | None, buf: bytearray | None = None, got: int = 0) -> bytearray:
        """`n` bytes from the socket, into `buf` after its first `got` bytes when given."""
        if buf is None:
            buf = bytearray(n)
        view = memoryview(buf)
        while got < n:
            self._check(deadline)
            try:
                k = _sock_recv_into(self.sock, view[got:], n - got)
            except BlockingIOError:
                self._wait(_POLLIN, deadline)
                continue
            if k == 0:
                raise EOFError("the other end closed the connection")
            got += k
        return buf

    def _read_frame(self, max_frame: int, deadline: float | None) -> bytearray:
        """One frame's payload through the read-ahead buffer (a copy: decoded arrays are views of it)."""
        ahead = self._ahead
        assert ahead is not None
        self._fill(_LEN.size, deadline)
        (n,) = _LEN.unpack_from(ahead, self._start)
        if n > max_frame:
            raise ProtocolError(f"message of {n} bytes exceeds the limit of {max_frame} bytes")
        if _LEN.size + n <= len(ahead):
            self._fill(_LEN.size + n, deadline)     # (may move the pending bytes to the front)
            start = self._start + _LEN.size
            payload = ahead[start:start + n]
            self._start = start + n
        else:                                 # larger than the buffer: what is here, then the rest
            start = self._start + _LEN.size
            payload = bytearray(n)
            have = self._end - start
            payload[:have] = ahead[start:self._end]
            self._start = self._end
            self._read(n, deadline, payload, have)
        if self._start == self._end:
            self._start = self._end = 0
        return payload

    def _fill(self, count: int, deadline: float | None) -> None:
        """Until `count` (at most READ_AHEAD) bytes not used yet are in the read-ahead buffer."""
        ahead = self._ahead
        assert ahead is not None
        if self._start + count > len(ahead):      # room at the end: move what is left to the front
            left = self._end - self._start
            ahead[:left] = ahead[self._start:self._end]
            self._start, self._end = 0, left
        while self._end - self._start < count:
            self._wait(_POLLIN, deadline)               # the other side is usually still working: wait first
            try:
                k = _sock_recv_into(self.sock, memoryview(ahead)[self._end:], len(ahead) - self._end)
            except BlockingIOError:
                continue
            if k == 0:
                raise EOFError("the other end closed the connection")
            self._end += k

    def send_fds(self, fds: list[int], *, deadline: float | None = None) -> None:
        """Pass open file descriptors to the other end (one marker byte carrying SCM_RIGHTS)."""
        while True:
            self._check(deadline)
            try:
                _sock_sendmsg(self.sock, [_FD_MARKER], [(_SOL_SOCKET, _SCM_RIGHTS, _pack_fds(fds))])
                return
            except BlockingIOError:
                self._wait(_POLLOUT, deadline)

    def recv_fds(self, count: int, *, deadline: float | None = None) -> list[int]:
        """Receive exactly `count` descriptors sent with send_fds (ProtocolError otherwise;
        any descriptors received are closed before raising)."""
        if self._ahead is not None:
            raise ProtocolError("descriptors cannot be received on a read-ahead channel")
        while True:
            self._check(deadline)
            try:
                data, ancillary, _, _ = _sock_recvmsg(self.sock, 1, _CMSG_SPACE(count * 4))
                break
            except BlockingIOError:
                self._wait(_POLLIN, deadline)
        fds: list[int] = []
        for level, kind, payload in ancillary:
            if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
                fds.extend(_unpack_fds(payload))
        if data != _FD_MARKER or len(fds) != count:
            for fd in fds:
                _os_close(fd)
            if not data:
                raise EOFError("the other end closed the connection")
            raise ProtocolError(f"expected {plural(count, 'file descriptor')}")
        return fds

    def close(self) -> None:
        _sock_close(self.sock)


_Socket = _socket.socket
_AF_UNIX, _SOCK_STREAM = _socket.AF_UNIX, _socket.SOCK_STREAM
_sock_fileno = _socket.socket.fileno
_sock_sendall = _socket.socket.sendall
_sock_send = _socket.socket.send
_sock_recv_into = _socket.socket.recv_into
_sock_settimeout = _socket.socket.settimeout
_sock_sendmsg = _socket.socket.sendmsg
_sock_recvmsg = _socket.socket.recvmsg
_sock_close = _socket.socket.close
_SOL_SOCKET = _socket.SOL_SOCKET
_SCM_RIGHTS = _socket.SCM_RIGHTS
_CMSG_SPACE = _socket.CMSG_SPACE
_struct_pack = struct.pack
_struct_unpack = struct.unpack


_FD_MARKER = b"F"
# The template's requests once its notebook ran are single bytes, not frames (a problem process
# is forked for each, and a frame's decoding would touch, and so copy, pages of the template every
# time): a descriptor sent with send_fds (its marker byte is FORK_REQUEST) asks for a problem
# process serving it; REAP_REQUEST followed by a pid (4 bytes, big-endian) asks how that problem
# process ended (answered with a frame, {"op": "reaped", "code"}).
FORK_REQUEST = _FD_MARKER
REAP_REQUEST = b"R"
_poll = select.poll
_POLLIN = select.POLLIN
_POLLOUT = select.POLLOUT
_os_close = os.close


def _pack_fds(fds: list[int]) -> bytes:
    return _struct_pack(f"{len(fds)}i", *fds)


def _unpack_fds(payload: bytes) -> list[int]:
    n = len(payload) // 4
    return list(_struct_unpack(f"{n}i", payload[: n * 4]))
