"""Messages between the trusted processes of a batch (the batch's driver, its workers and its
gradebook writer): one JSON object per line over a socket or pipe. Both ends are this program;
nothing here ever carries student data except results, which are plain data already."""
from __future__ import annotations

import json
import os
import socket
from typing import Any

MAX_LINE = 64 * 2**20          # a result is bounded (reporting.bounds); this only stops a runaway


class WireClosed(EOFError):
    """The other end closed the connection."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode() + b"\n"


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

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(encode(message))

    def has_pending(self) -> bool:
        """Whether a complete message is already buffered (without taking it)."""
        return b"\n" in self._buffer

    def pending(self) -> dict[str, Any] | None:
        """A complete message already buffered, if any."""
        end = self._buffer.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[:end + 1]
        message: dict[str, Any] = json.loads(line)
        return message

    def fill(self) -> None:
        """Read what is available (one recv); WireClosed at end of stream."""
        data = self.sock.recv(1 << 20)
        if not data:
            raise WireClosed("the other end closed the connection")
        self._buffer += data
        if len(self._buffer) > MAX_LINE and b"\n" not in self._buffer:
            raise ValueError("message too long")

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
