"""Helpers for tests that start a server process on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Terminate a server process, killing it if it does not exit within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def listening(process: subprocess.Popen, port: int, seconds: float) -> bool:  # type: ignore[type-arg]
    """Wait until ``process`` accepts connections on 127.0.0.1:``port``; False if it exits or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)
