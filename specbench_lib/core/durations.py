"""Wall-time budgets as people write them: ``10m``, ``90s``, ``1h30m``, ``480`` (seconds)."""

from __future__ import annotations

import re

from .errors import ParamsError

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}
NONE_WORDS = ("none", "null", "off", "fixed")


def parse_duration(value: object, *, key: str = "time_budget_s") -> float | None:
    """Seconds from ``value`` (a number of seconds, or ``10m``, ``90s``, ``1h30m``); None for
    ``None``/``"none"``/``"null"``/``"off"``/``"fixed"`` (the fixed full plan). A value that is
    neither is a :class:`ParamsError` naming ``key`` (the flag or parameter it came from)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _bad(value, key)
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        if text in NONE_WORDS:
            return None
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not parts or _PART.sub("", text).strip():
                raise _bad(value, key) from None
            seconds = sum(float(n) * _UNIT[u] for n, u in parts)
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise _bad(value, key)
    return seconds


def _bad(value: object, key: str) -> ParamsError:
    return ParamsError(f"{key} {value!r} is not a time budget: give seconds (480) or a duration "
                       f"such as 10m, 90s or 1h30m, or none for the fixed full plan", key=key,
                       value=value)


def span(seconds: float) -> str:
    """``3 m 10 s``, ``45 s``: how an answer line says a duration."""
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} m {secs} s" if minutes else f"{secs} s"
