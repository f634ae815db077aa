"""Checks every configuration runs on construction, and reading a dataclass from a dict that names unknown keys."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message names it."""


def is_int(value: object, low: int | None = None, high: int | None = None, kinds: tuple[type, ...] = (int,)) -> bool:
    """Whether `value` is an integer of `kinds` (never a bool) within ``[low, high]``; a bound left None is open."""
    return isinstance(value, kinds) and not isinstance(value, bool) and \
        (low is None or value >= low) and (high is None or value <= high)  # type: ignore[operator]


def check_int(name: str, value: object, low: int | None = None, high: int | None = None, *,
              error: Callable[[str], Exception] = ConfigError, message: str | None = None,
              kinds: tuple[type, ...] = (int,)) -> int:
    """`value` as an int where `is_int`, else `error` of `message` (by default "NAME must be an integer, got ..." or
    "NAME must be in [LOW, HIGH], got ...")."""
    if not is_int(value, kinds=kinds):
        raise error(message or f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if not is_int(value, low, high, kinds):
        bounds = f"in [{low}, {high}]" if low is not None and high is not None else \
            f">= {low}" if low is not None else f"<= {high}"
        raise error(message or f"{name} must be {bounds}, got {value}")
    return int(value)  # type: ignore[call-overload]


def _check_float(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be in [{low}, {high}], got {value}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def from_dict(cls: type[T], data: dict[str, Any], source: str = "config") -> T:
    """Build dataclass `cls` from `data`, naming any unknown key (with the closest known one)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        import difflib

        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(f"{source}: unknown key(s) {', '.join(hints)} for {cls.__name__}")
    try:
        return cls(**data)
    except (TypeError, ConfigError) as err:  # e.g. a missing required field, or a value out of range
        raise ConfigError(f"{source}: {err}") from None
