"""One log line per episode of a repeated failure, not one per failure.

A peer that sends 20,000 stray responses, or a server out of file descriptors failing every
``accept``, would otherwise write a line (or a traceback) for each. An `Episode` logs the
first occurrence, counts the rest, and says how many there were when the next occurrence comes
after a quiet gap (a new episode) or, while it lasts, once every ``report_every`` seconds.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

__all__ = ["QUIET_SECONDS", "REPORT_SECONDS", "Episode", "EpisodeFilter"]

QUIET_SECONDS: Final = 10.0
"""Seconds without an occurrence that end an episode."""
REPORT_SECONDS: Final = 60.0
"""Seconds between the counts logged while an episode goes on."""


class Episode:
    """Decides which occurrences of one kind of failure are logged."""

    __slots__ = ("_first", "_last", "_reported", "_suppressed", "quiet", "report_every")

    def __init__(self, *, quiet: float = QUIET_SECONDS, report_every: float = REPORT_SECONDS) -> None:
        self.quiet = quiet
        """Seconds without an occurrence that end an episode."""
        self.report_every = report_every
        """Seconds between counts while an episode goes on."""
        self._first = self._last = self._reported = -float("inf")
        self._suppressed = 0

    def occur(self) -> tuple[bool, int]:
        """Note one occurrence: whether to log it, and how many were left unlogged before it."""
        now = time.monotonic()
        new = now - self._last > self.quiet
        self._last = now
        if new or now - self._reported >= self.report_every:
            suppressed, self._suppressed = self._suppressed, 0
            self._reported = now
            if new:
                self._first = now
            return True, suppressed
        self._suppressed += 1
        return False, 0

    def log(self, logger: logging.Logger, level: int, message: str, *args: Any) -> None:
        """Log ``message`` if this occurrence is the first of an episode or due for a count."""
        logged, suppressed = self.occur()
        if logged:
            logger.log(level, "%s%s", message % args if args else message, self.note(suppressed))

    def note(self, suppressed: int) -> str:
        """The text added to a logged occurrence."""
        held = f"{suppressed} more like this not logged; " if suppressed else ""
        return f" ({held}repeats within {self.quiet:.0f} s are counted, not logged)"


class EpisodeFilter(logging.Filter):
    """A logging filter letting through one record per episode of each listed message (others pass as they are).

    ``prefixes`` name the messages (the start of the record's format string). A record let through loses its
    traceback (a storm of the same traceback says nothing new) and says how many were held back.
    """

    def __init__(self, prefixes: tuple[str, ...], *, quiet: float = QUIET_SECONDS,
                 report_every: float = REPORT_SECONDS) -> None:
        super().__init__()
        self._episodes = {prefix: Episode(quiet=quiet, report_every=report_every) for prefix in prefixes}

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is logged."""
        message = record.msg if isinstance(record.msg, str) else ""
        for prefix, episode in self._episodes.items():
            if message.startswith(prefix):
                logged, suppressed = episode.occur()
                if not logged:
                    return False
                record.msg = record.getMessage() + episode.note(suppressed)
                record.args = None
                record.exc_info = None
                record.exc_text = None
                return True
        return True
