"""Typed settings: a value's session key, default and link parameter (`Setting`, `Link`), and a page's settings as one
frozen dataclass of them (`PageSettings`) whose link round trip is derived from those declarations."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

import streamlit as st

T = TypeVar("T")
_UNSET: Any = object()


@dataclass(frozen=True)
class Link:
    """A setting in the shared link: its parameter `name`, how a link value becomes the setting's value (a
    `ValueError` saying what is allowed when it cannot), how the value is written, and whether a value equal to
    the default is left out of the link (`omit_default`) or written like any other."""

    name: str
    parse: Callable[[str], Any] = str
    format: Callable[[Any], str] = str
    omit_default: bool = False


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One value a page keeps in session state under `key` (its widget is keyed `widget_key`, see `state.bound`)."""

    key: str
    default: T
    link: Link | None = None

    @property
    def widget_key(self) -> str:
        return f"w_{self.key}"

    def get(self, default: T = _UNSET) -> T:
        """The value in session state; where there is none, `default` (else the declared one)."""
        if self.key in st.session_state:
            return st.session_state[self.key]
        return copy.copy(self.default) if default is _UNSET else default

    def set(self, value: T) -> None:
        st.session_state[self.key] = value

    def init(self, default: T = _UNSET) -> T:
        """The value in session state, after putting `default` (else a copy of the declared one) there if absent."""
        return st.session_state.setdefault(self.key, copy.copy(self.default) if default is _UNSET else default)

    def pop(self) -> T:
        """The value in session state, removed (the default when there was none)."""
        return st.session_state.pop(self.key, self.default)


def ignored(name: str, raw: str, why: str) -> str:
    """The message for a link value that cannot be used, quoting it in a code span (Markdown escapes would show)."""
    shown = raw[:60].replace("`", "'").replace("\n", " ")
    return f"`{name}={shown}` ignored: {why}"


class PageSettings:
    """Base of a page's frozen dataclass whose fields are `Setting`s: the link's round trip, from their declarations."""

    def settings(self) -> tuple[Setting, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]

    def linked(self) -> tuple[Setting, ...]:
        """The settings that go into the link, in the order the link names them."""
        return tuple(s for s in self.settings() if s.link is not None)

    def link_names(self) -> tuple[str, ...]:
        return tuple(s.link.name for s in self.linked())

    def to_link(self, values: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The link parameters of `values` (session state): each linked setting that holds a value, except one at its
        default (`defaults` by key, else the declared one) where its link omits the default."""
        params = {}
        for s in self.linked():
            if s.key not in values:
                continue
            value = values[s.key]
            if not s.link.omit_default or value != (defaults or {}).get(s.key, s.default):
                params[s.link.name] = s.link.format(value)
        return params

    def from_link(self, params: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
        """The values a link's `params` hold (session key -> value), and a message for each one that cannot be used."""
        values, problems = {}, []
        for s in self.linked():
            raw = params.get(s.link.name)
            if raw is None:
                continue
            try:
                values[s.key] = s.link.parse(raw)
            except ValueError as err:
                problems.append(ignored(s.link.name, raw, str(err)))
        return values, problems
