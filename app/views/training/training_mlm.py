"""The training recipe with an encoder open: where its run is recorded (a model `viz-model train` trained with the
masked-language-model objective), its held-out masked-token scores, and the encoder-only stack with the tensor shapes
for the current text."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app import fill_in
from app.sessions import Session
from app.views.training import recipe_sections
from viz_model.kinds.encoder import EncoderModel
from viz_model.modeldir.checkpoint import TRAINING_LOG


def no_log_line(model: EncoderModel) -> str:
    """The one line for an encoder without a training log (an imported one: its training is its source's)."""
    return (f"{model.name} has no {TRAINING_LOG}: it was not trained here with `viz-model train` (an imported "
            "encoder's training is documented where it came from), so there are no curves or recipe of its own to "
            "draw here.")


def held_out_scores(events: list[dict]) -> pd.DataFrame:
    """The last ``test`` event's scores per held-out set: masked tokens, top-1 and top-5 accuracy, NLL and its
    perplexity (empty where the log has none)."""
    tests = [e for e in events if e.get("event") == "test" and isinstance(e.get("results"), dict)]
    results = tests[-1]["results"] if tests else {}
    rows = [{"held-out set": name, "sentences": found.get("lines"), "masked tokens": found.get("masked"),
             "top-1 accuracy": found.get("top1"), "top-5 accuracy": found.get("top5"), "NLL": found.get("nll"),
             "perplexity": math.exp(found["nll"]) if isinstance(found.get("nll"), (int, float)) else None}
            for name, found in results.items() if isinstance(found, dict)]
    return pd.DataFrame(rows, columns=["held-out set", "sentences", "masked tokens", "top-1 accuracy",
                                       "top-5 accuracy", "NLL", "perplexity"])


def held_out_section(events: list[dict]) -> None:
    """The masked-token accuracy on the held-out sets, as the run's last evaluation logged it."""
    st.subheader("Masked-token accuracy, held out")
    scores = held_out_scores(events)
    if scores.empty:
        st.info(f"The {TRAINING_LOG} holds no held-out evaluation (a `test` event): the curves above are all it "
                "logged.")
        return
    st.dataframe(scores, hide_index=True, width="stretch",
                 column_config={name: st.column_config.NumberColumn(format="%.4f")
                                for name in ("top-1 accuracy", "top-5 accuracy", "NLL", "perplexity")})
    st.caption("The objective hides 15% of the ordinary tokens (80% of them become the mask token, 10% a random "
               "token, 10% stay) and scores the model's prediction at those positions only: the loss and "
               "perplexity above are per masked token. Held out, every chosen token becomes the mask token, as a "
               "fill-in-the-blank user writes it; top-1 is how often the first prediction is the hidden token.")


def stages(model: EncoderModel, length: int) -> list[dict[str, str]]:
    """Each stage of one pass over `length` tokens (batch 1): what it computes and its tensor's shape."""
    cfg = model.config
    d, h, dk, ff, v = cfg.d_model, cfg.heads, cfg.d_head, cfg.d_ff, cfg.vocab_size
    width = cfg.embedding_size or d
    layer = f"each of {cfg.encoder_layers} layers"
    added = "token types and " if cfg.type_vocab_size else ""
    table = [("input", "token ids", (1, length), "[CLS] text [SEP], masks included"),
             ("input", "embedding", (1, length, width), f"{added}{cfg.positional} positions added"
              + (f", then projected to d_model {d}" if width != d else "")),
             (layer, "queries Q, keys K, values V", (1, h, length, dk), f"{h} heads of d_k = {dk}"),
             (layer, "weights softmax(QKᵀ/√d_k)", (1, h, length, length), "no causal mask: every token sees every "
              "other"),
             (layer, "heads concatenated × W_O", (1, length, d), "added to the residual stream"),
             (layer, "feed-forward hidden", (1, length, ff), cfg.activation),
             ("masked-LM head", "logits", (1, length, v), "read at the masks: the loss is scored there only")]
    return [{"part": part, "stage": stage, "shape": " × ".join(map(str, shape)), "note": note}
            for part, stage, shape, note in table]


def architecture_section(session: Session) -> None:
    """The encoder-only stack's stages with the shapes for the current text."""
    model: EncoderModel = session.model  # type: ignore[assignment]
    cfg = model.config
    recipe_sections.shapes_section(
        "text", lambda: fill_in.current_reading(session),
        lambda trace: f"An encoder-only stack: {len(trace.source_tokens)} tokens, special tokens included, read at "
                      f"once; {cfg.encoder_layers} {cfg.norm}-norm layers of {cfg.heads} heads; vocabulary "
                      f"{cfg.vocab_size:,}.",
        lambda trace: stages(model, len(trace.source_tokens)))
