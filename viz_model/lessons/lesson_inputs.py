"""What a lesson's user types, checked: a bad value raises `InputError` with a message that says what to fix."""

from __future__ import annotations

import math

import numpy as np

from ..config.checks import check_int


class InputError(ValueError):
    """A value the user typed cannot be used; the message says why and what to do."""


def whole_number(name: str, value: object, low: int, high: int) -> int:
    """A number typed on a page as a whole number (3.0 counts) from `low` to `high`, else an `InputError` naming it."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    check_int(name, value, error=InputError, kinds=(int, np.integer),
              message=f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return check_int(name, value, low, high, error=InputError, kinds=(int, np.integer),
                     message=f"{name} must be from {low} to {high}, got {value}")


def check_float(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not math.isfinite(value):
        raise InputError(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")
    if not low <= float(value) <= high:
        raise InputError(f"{name} must be from {low:g} to {high:g}, got {value:g}")
    return float(value)
