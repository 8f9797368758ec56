"""Copying bytes between a TCP socket and an SSH channel, both ways (port forwards, both ends)."""

from __future__ import annotations

import select
import socket
import threading

import paramiko


def pump(sock: socket.socket, chan: paramiko.Channel, stop: threading.Event) -> None:
    """Until either side closes, breaks, or `stop` is set. Closes neither: the caller owns them."""
    try:
        while not stop.is_set():
            readable, _, _ = select.select([sock, chan], [], [], 0.5)  # type: ignore[type-var]
            if sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                chan.sendall(data)
            if chan in readable:
                data = chan.recv(65536)
                if not data:
                    return
                sock.sendall(data)
    except (OSError, EOFError, paramiko.SSHException):
        return


def quiet_close(chan: paramiko.Channel) -> None:
    """Closing a channel of a dead connection raises EOFError; the caller already knows, or does not care."""
    try:
        chan.close()
    except (OSError, EOFError, paramiko.SSHException):
        pass
