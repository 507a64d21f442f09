"""Messages between the trusted processes of a batch (the batch's driver, its workers and its
gradebook writer): one JSON object per line over a socket or pipe. Both ends are this program;
nothing here ever carries student data except results, which are plain data already.

A message may carry one JSON value already encoded (`send(message, attached=data)`): it follows its
message as a line of its own, and `pending` returns it under "attached", as those bytes, undecoded.
So a result encoded once by its worker reaches the gradebook writer through the batch's driver
without being encoded again (the driver decodes it for itself, and passes the bytes on)."""
from __future__ import annotations

import json
import os
import socket
from typing import Any

MAX_LINE = 64 * 2**20          # a result is bounded (reporting.bounds); this only stops a runaway
ATTACHED = "attached"          # a message's key for the encoded value that follows it (see the docstring)


class WireClosed(EOFError):
    """The other end closed the connection."""


def encode(message: dict[str, Any], attached: bytes | None = None) -> bytes:
    """The message's line; with `attached` (one encoded JSON value, on one line), that line after it."""
    if attached is None:
        return dumps(message) + b"\n"
    if b"\n" in attached:
        raise ValueError("an attached value must be encoded on one line")
    return b"".join((dumps({**message, ATTACHED: True}), b"\n", attached, b"\n"))


def dumps(value: Any) -> bytes:
    """One JSON value as this wire encodes it (on one line)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()


class Connection:
    """A line-framed JSON connection over a connected socket (blocking unless used with select)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()

    @classmethod
    def from_fd(cls, fd: int) -> Connection:
        return cls(socket.socket(fileno=fd))

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any], attached: bytes | None = None) -> None:
        self.sock.sendall(encode(message, attached))

    def has_pending(self) -> bool:
        """Whether a complete line is already buffered (without taking it): a message, or the first
        line of one whose attached value is still on its way."""
        return b"\n" in self._buffer

    def pending(self) -> dict[str, Any] | None:
        """A complete message already buffered, if any (with its attached value as bytes under
        "attached", when it has one)."""
        end = self._buffer.find(b"\n")
        if end < 0:
            return None
        message: dict[str, Any] = json.loads(bytes(self._buffer[:end]))
        if isinstance(message, dict) and message.get(ATTACHED) is True:
            tail = self._buffer.find(b"\n", end + 1)
            if tail < 0:
                return None                     # its value is not all here yet: taken together later
            message[ATTACHED] = bytes(self._buffer[end + 1:tail])
            end = tail
        del self._buffer[:end + 1]
        return message

    def fill(self) -> None:
        """Read what is available (one recv); WireClosed at end of stream."""
        data = self.sock.recv(1 << 20)
        if not data:
            raise WireClosed("the other end closed the connection")
        self._buffer += data
        if len(self._buffer) - self._buffer.rfind(b"\n") - 1 > MAX_LINE:
            raise ValueError("message too long")    # its last line, unfinished, is already too long

    def recv(self) -> dict[str, Any]:
        """The next message (blocking)."""
        while True:
            message = self.pending()
            if message is not None:
                return message
            self.fill()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def socket_pair() -> tuple[Connection, int]:
    """(our end, the descriptor to pass to a child process, inheritable)."""
    ours, theirs = socket.socketpair()
    fd = theirs.detach()
    os.set_inheritable(fd, True)
    return Connection(ours), fd
