"""One small exception tree for the whole package.

``SkillstreamError`` is the base. ``TransientError`` means "try again later" (a timeout, HTTP 429,
a busy file), ``TerminalError`` means retrying the same thing cannot help. ``InputError`` is a
terminal error about a record or argument supplied by the user; its message says what was expected,
what came, and what to do.
"""

from __future__ import annotations


class SkillstreamError(Exception):
    """Base class of every error raised on purpose by skillstream."""


class TransientError(SkillstreamError):
    """A failure that may go away on retry (timeouts, rate limits, busy resources)."""


class TerminalError(SkillstreamError):
    """A failure that retrying the same request will not fix."""


class InputError(TerminalError):
    """A record, file or argument given by the user is not valid."""


class ConfigError(TerminalError):
    """A setting is missing or has a value that cannot work."""


class MissingExtraError(ConfigError):
    """An optional dependency is not installed."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"the optional module {module!r} is not installed; "
            f"install it with: pip install 'skillstream[{extra}]'"
        )
