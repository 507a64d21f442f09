"""The batch's line-framed JSON messages (autograder.batch.wire), with an encoded value attached."""
from __future__ import annotations

import json
import socket

import pytest

from autograder.batch import wire
from autograder.batch.wire import ATTACHED, Connection, WireClosed, dumps, encode


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    ours, theirs = Connection(a), Connection(b)
    yield ours, theirs
    ours.close()
    theirs.close()


def test_a_message_arrives_as_sent(pair):
    """Does a plain message come back as the same dict?"""
    ours, theirs = pair
    ours.send({"op": "grade", "id": 3, "task": {"student": "ana"}})
    assert theirs.recv() == {"op": "grade", "id": 3, "task": {"student": "ana"}}


def test_an_attached_value_arrives_as_the_bytes_sent(pair):
    """Is an attached value handed over as the encoded bytes, undecoded, with its message?"""
    ours, theirs = pair
    value = {"student": "ana", "tests": [{"score": 1.5, "output": "line\nbreak \u00e9"}]}
    encoded = dumps(value)
    ours.send({"op": "result", "id": 1}, attached=encoded)
    ours.send({"op": "quit"})
    got = theirs.recv()
    assert got == {"op": "result", "id": 1, ATTACHED: encoded}
    assert json.loads(got[ATTACHED]) == value
    assert theirs.recv() == {"op": "quit"}


def test_a_message_is_not_taken_before_its_attached_value_is_all_there():
    """When the message's line has arrived but not its value's, does `pending` wait for both?"""
    data = encode({"op": "record"}, attached=dumps({"a": "b" * 100}))
    first = data.index(b"\n") + 1
    a, b = socket.socketpair()
    conn = Connection(b)
    try:
        a.sendall(data[:first + 10])
        conn.fill()
        assert conn.has_pending() and conn.pending() is None
        a.sendall(data[first + 10:])
        assert conn.recv() == {"op": "record", ATTACHED: dumps({"a": "b" * 100})}
        assert conn.pending() is None
        a.close()
        with pytest.raises(WireClosed):
            conn.fill()
    finally:
        a.close()
        conn.close()


def test_an_attached_value_on_two_lines_is_refused():
    """Is a value that is not on one line refused before it is sent?"""
    with pytest.raises(ValueError):
        encode({"op": "record"}, attached=b'{"a":\n1}')


def test_an_endless_line_after_a_message_is_stopped(monkeypatch):
    """Does the length limit hold for a line that follows a complete one (an attached value)?"""
    monkeypatch.setattr(wire, "MAX_LINE", 1000)
    a, b = socket.socketpair()
    conn = Connection(b)
    try:
        a.sendall(b'{"op":"record","attached":true}\n' + b"x" * 1001)
        with pytest.raises(ValueError):
            while True:
                conn.fill()
    finally:
        a.close()
        conn.close()
