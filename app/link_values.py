"""Parsers of link values for `settings.Link`: each returns the setting's value or raises a `ValueError` that says
what the link may hold."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any


def url_number(value: str) -> int:
    """A URL parameter as a small whole number (1 to 6 ASCII digits), or -1: "²", "1e9" or 5,000 digits are no
    number (``str.isdigit`` accepts "²", which ``int`` then refuses)."""
    return int(value) if re.fullmatch(r"[0-9]{1,6}", value) else -1


def whole_number(low: int, high: int, what: str = "a whole number") -> Callable[[str], int]:
    """A whole number from `low` to `high` ("use `what` from low to high" otherwise)."""
    def parse(raw: str) -> int:
        value = url_number(raw)
        if not low <= value <= high:
            raise ValueError(f"use {what} from {low} to {high}")
        return value
    return parse


def from_one(what: str, also: Iterable[str] = ()) -> Callable[[str], int | str]:
    """A whole number from 1, or one of the words `also` ("use `what` from 1[, a or b]" otherwise)."""
    words = tuple(also)

    def parse(raw: str) -> int | str:
        if raw in words:
            return raw
        if url_number(raw) < 1:
            raise ValueError(f"use {what} from 1" + (f", {', '.join(words[:-1])} or {words[-1]}" if words else ""))
        return url_number(raw)
    return parse


def one_of(options: Iterable[Any], why: str = "") -> Callable[[str], Any]:
    """One of `options`, matched by its text ("use one of a, b, c", or `why`, otherwise)."""
    by_text = {str(option): option for option in options}

    def parse(raw: str) -> Any:
        if raw not in by_text:
            raise ValueError(why or f"use one of {', '.join(by_text)}")
        return by_text[raw]
    return parse


def number(low: float, high: float, what: str = "a number", digits: int | None = None) -> Callable[[str], float]:
    """A finite number from `low` to `high`, rounded to `digits` when given ("use `what` from low to high")."""
    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not low <= value <= high:  # NaN fails too
            raise ValueError(f"use {what} from {low:g} to {high:g}")
        return value if digits is None else round(value, digits)
    return parse


def number_text(value: float) -> str:
    """A number as a link writes it: 1.4, 0.6, 2."""
    return f"{float(value):g}"


def one_line(limit: int, what: str) -> Callable[[str], str]:
    """Text of at most `limit` characters on one line ("use `what` of one line, at most `limit` characters")."""
    def parse(raw: str) -> str:
        if len(raw) > limit or "\n" in raw or "\r" in raw:
            raise ValueError(f"use {what} of one line, at most {limit} characters")
        return raw
    return parse
