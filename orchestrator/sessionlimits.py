"""The limits of session stores and leases: read at each use (``sessionlimits.LEASE_WAIT``), so a program
or a test may change them.
"""

from __future__ import annotations

MAX_MESSAGES = 10_000
"""Messages one session may hold; an append past it says to compact the conversation or start a new session."""

MAX_BYTES = 16_000_000
"""Bytes of JSON one session's messages may take."""

MAX_STATE_BYTES = 16_000_000
"""Bytes of JSON one suspended run's state may take."""

LEASE_SECONDS = 900.0
"""Seconds a session's lease lasts after its last renewal; a holder renews it every third of this."""

LEASE_WAIT = 60.0
"""Seconds a run waits for a session another run holds, unless ``holding`` is given ``wait``."""
