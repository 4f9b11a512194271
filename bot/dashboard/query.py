"""Query parameters of the dashboard's pages, checked: a bad value is a :class:`BadQuery`
(answered 400 with its message), never a traceback."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date

from rag.types import LANGUAGES, Status
from storage.db import SOURCES
from storage.reader import CHANNELS, DecisionFilter

STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
FILTER_KEYS: tuple[str, ...] = ("status", "lang", "channel", "source", "from", "to")
"""Query parameters of the questions list that narrow it (``page`` and ``per`` page it)."""
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


class BadQuery(ValueError):
    """A query parameter the page cannot use; ``str(err)`` names it, its value and what is
    allowed."""


def decision_filter(query: Mapping[str, str], default_per: int, max_per: int) -> DecisionFilter:
    """The list's filter from ``?status=&lang=&channel=&source=&from=&to=&page=&per=``. Empty
    values mean any; ``from``/``to`` are ``YYYY-MM-DD`` (UTC, inclusive).

    Raises:
        BadQuery: an unknown parameter, a value outside its choices, a malformed date or number,
            ``from`` after ``to``.
    """
    unknown = sorted(set(query) - {*FILTER_KEYS, "page", "per"})
    if unknown:
        raise BadQuery(f"unknown query parameter {unknown[0]!r}; the list takes "
                       f"{', '.join((*FILTER_KEYS, 'page', 'per'))}")
    date_from, date_to = _date(query, "from"), _date(query, "to")
    if date_from and date_to and date_from > date_to:
        raise BadQuery(f"from {date_from} is after to {date_to}")
    return DecisionFilter(
        status=_choice(query, "status", STATUSES), lang=_choice(query, "lang", LANGUAGES),
        channel=_choice(query, "channel", CHANNELS), source=_choice(query, "source", SOURCES),
        date_from=date_from, date_to=date_to, page=positive_int(query, "page", 1, 1_000_000),
        per=positive_int(query, "per", default_per, max_per))


def positive_int(query: Mapping[str, str], key: str, default: int, maximum: int) -> int:
    """``query[key]`` as an integer in 1..``maximum`` (``default`` when absent or empty)."""
    raw = query.get(key, "").strip()
    if not raw:
        return default
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise BadQuery(f"{key} must be a whole number from 1 to {maximum}, got {raw[:40]!r}")
    return int(raw)


def _choice(query: Mapping[str, str], key: str, choices: tuple[str, ...]) -> str | None:
    raw = query.get(key, "").strip()
    if not raw:
        return None
    if raw not in choices:
        raise BadQuery(f"{key} {raw[:40]!r} is not one of {', '.join(choices)}")
    return raw


def _date(query: Mapping[str, str], key: str) -> date | None:
    raw = query.get(key, "").strip()
    if not raw:
        return None
    try:
        if not _DATE_RE.fullmatch(raw):
            raise ValueError
        return date.fromisoformat(raw)
    except ValueError:
        raise BadQuery(f"{key} must be a date as YYYY-MM-DD (UTC), got {raw[:40]!r}") from None
