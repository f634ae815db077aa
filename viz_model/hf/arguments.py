"""How messages name the choices they were given: the keywords of a Python call (``source_lang=``), or the CLI's
flags (``--source-lang``) inside `command_line_flags` (what the ``viz-model`` command runs in)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

_FLAGS: ContextVar[bool] = ContextVar("viz_model_command_line_flags", default=False)


def argument(name: str, value: object = None, quoted: bool = True) -> str:
    """The choice `name` (``source_lang``, ``dtype``, ``out``, ``precision``) as the call that was made spells it, with
    `value` where given: ``source_lang='xx'`` from Python, ``--source-lang 'xx'`` (``--dtype fp16`` unquoted) on the
    command line."""
    if not _FLAGS.get():
        return f"{name}={value!r}" if value is not None else f"{name}="
    flag = "--" + name.replace("_", "-")
    return flag if value is None else f"{flag} {value!r}" if quoted else f"{flag} {value}"


@contextmanager
def _naming(flags: bool) -> Iterator[None]:
    token = _FLAGS.set(flags)
    try:
        yield
    finally:
        _FLAGS.reset(token)


def command_line_flags() -> AbstractContextManager[None]:
    """Within it (one thread's or task's calls), messages name the ``viz-model`` command's flags."""
    return _naming(True)


def keyword_arguments() -> AbstractContextManager[None]:
    """Within it, messages name keywords of a Python call (the default; for a Python call made under the CLI)."""
    return _naming(False)
