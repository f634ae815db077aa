"""The training recipe with a language model open: where its run is recorded (a model `viz-model train` trained), and
the decoder-only architecture with the tensor shapes for the prompt and its continuation."""

from __future__ import annotations

from app import completion
from app.sessions import Session
from app.views.training import recipe_sections
from viz_model.kinds.language_model import LanguageModel
from viz_model.modeldir.checkpoint import TRAINING_LOG
from viz_model.modeldir.training_facts import TrainingFacts, load_training_facts
from viz_model.tokenization.lm_tokenizer import LMTokenizer
from viz_model.trace import AttentionTrace


def imported(model: LanguageModel) -> bool:
    """Whether the model came from another framework (its own tokenizer), not from `viz-model train`."""
    return isinstance(model.tokenizer, LMTokenizer)


def facts_of(model: LanguageModel) -> TrainingFacts | None:
    """Its training_facts.json, None where it has none (or no folder)."""
    return None if model.directory is None else load_training_facts(model.directory)


def no_log_line(model: LanguageModel) -> str:
    """The one line for a language model without a training log."""
    source = "was imported from another framework, and its training is documented where it came from" if imported(
        model) else f"has no {TRAINING_LOG}"
    return f"{model.name} {source}: there are no curves or recipe of its own to draw here."


def stages(model: LanguageModel, length: int) -> list[dict[str, str]]:
    """Each stage of one forward pass over `length` tokens (batch 1): what it computes and its tensor's shape."""
    cfg = model.config
    d, h, kv, dk, ff, v = cfg.d_model, cfg.heads, cfg.kv_heads or cfg.heads, cfg.d_head, cfg.d_ff, cfg.vocab_size
    n = length

    def row(part: str, stage: str, shape: tuple[int, ...], note: str = "") -> dict[str, str]:
        return {"part": part, "stage": stage, "shape": " × ".join(map(str, shape)), "note": note}

    layer = f"each of {cfg.decoder_layers} layers"
    position = {"rope": "rotary: q and k rotated by position", "alibi": "ALiBi: a bias on the scores",
                "learned": "a learned table added to the input", "sinusoidal": "sinusoids added to the input"}
    rows = [row("input", "token ids", (1, n), "prompt + continuation"),
            row("input", "embedding", (1, n, d), position.get(cfg.positional, cfg.positional)),
            row(layer, "queries Q", (1, h, n, dk), f"{h} query heads"),
            row(layer, "keys K, values V", (1, kv, n, dk),
                f"{kv} key/value heads, each read by {h // kv} query heads" if kv != h else "one per query head"),
            row(layer, "weights softmax(QKᵀ/√d_k + causal mask)", (1, h, n, n), "position t sees keys 0..t"),
            row(layer, "heads concatenated × W_O", (1, n, d), "added to the residual stream"),
            row(layer, "feed-forward hidden", (1, n, ff), cfg.activation + (" gated" if cfg.gated_ffn else "")),
            row("output", "final norm, logits", (1, n, v), "the next token's scores at every position")]
    return rows


def architecture_section(session: Session) -> None:
    """The decoder-only stack's stages with the shapes for the current prompt and continuation."""
    model: LanguageModel = session.model  # type: ignore[assignment]
    cfg = model.config

    def summary(trace: AttentionTrace) -> str:
        n, prompt = len(trace.target_tokens), completion.prompt_length(trace)
        return (f"A decoder-only stack: {prompt} prompt tokens + {n - prompt} new ones = {n} positions; {cfg.heads} "
                f"query heads of d_k = {cfg.d_head}; {cfg.normalization} norm; vocabulary {cfg.vocab_size:,}.")

    recipe_sections.shapes_section("prompt", lambda: completion.current_completion(session), summary,
                                   lambda trace: stages(model, len(trace.target_tokens)))
