"""The three kinds of attention, named once for the library, the figures and the app."""

from __future__ import annotations

ATTENTION_KINDS = ("encoder", "decoder", "cross")
KIND_LABELS = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention", "cross": "Cross-attention"}
KIND_TITLES = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention (masked)",
               "cross": "Cross-attention (decoder → encoder)"}


def check_kind(kind: object) -> str:
    """`kind` itself when it is an attention kind; else a ValueError naming the three."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be encoder, decoder or cross; got {kind!r}")
    return kind  # type: ignore[return-value]
