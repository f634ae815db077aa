"""How the import's messages name the choices it was given: the CLI's flags (``--source-lang``), or the keywords of
`viz_model.load` / `from_transformers` (``source_lang=``) inside `keyword_arguments`."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_KEYWORDS: ContextVar[bool] = ContextVar("viz_model_import_keywords", default=False)


def argument(name: str, value: object = None, quoted: bool = True) -> str:
    """The choice `name` (``source_lang``, ``target_lang``, ``dtype``) as the call that was made spells it, with
    `value` where given: ``--source-lang 'xx'`` (``--dtype fp16`` unquoted) on the command line, ``source_lang='xx'``
    from Python."""
    if _KEYWORDS.get():
        return f"{name}={value!r}" if value is not None else f"{name}="
    flag = "--" + name.replace("_", "-")
    return flag if value is None else f"{flag} {value!r}" if quoted else f"{flag} {value}"


@contextmanager
def keyword_arguments() -> Iterator[None]:
    """Within it (one thread's or task's calls), messages name keywords of a Python call, not CLI flags."""
    token = _KEYWORDS.set(True)
    try:
        yield
    finally:
        _KEYWORDS.reset(token)


def renamed_precision(precision: str, search: str | None, call: str) -> str:
    """The search precision of `call` (``load``, ``from_transformers``): `precision`, or `search`, its old name,
    with a DeprecationWarning (both given and different: ValueError)."""
    if search is None:
        return precision
    warnings.warn(f"{call}(search=...) is deprecated: its name is precision= (search= goes in the next release)",
                  DeprecationWarning, stacklevel=3)
    if precision not in ("auto", search):
        raise ValueError(f"{call}() got precision={precision!r} and search={search!r}: give precision= only")
    return search
