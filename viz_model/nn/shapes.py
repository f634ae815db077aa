"""The tensor shape at every stage of one translation, from a model's config and a sentence's lengths."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelConfig
from ..config.model import INPUT_POSITIONS


@dataclass
class Stage:
    """One row of the architecture table: what is computed and the tensor's shape for this sentence."""

    part: str
    stage: str
    shape: tuple[int, ...]
    note: str = ""


def architecture(config: ModelConfig, src_len: int, tgt_len: int) -> list[Stage]:
    """The tensor shapes at every stage of one translation, batch 1, from the config and the sentence's lengths."""
    d, h, dk, ff, v = config.d_model, config.heads, config.d_head, config.d_ff, config.vocab_size
    s, t = src_len, tgt_len
    name = "RMSNorm" if config.normalization == "rms" else "LayerNorm"
    norm = f"{name}(x + Sublayer(x))" if config.norm == "post" else f"x + Sublayer({name}(x))"
    embedding = "embedding × √d_model" if config.scale_embeddings else "embedding"
    lookup = "table lookup" + (f"; {name} after the positions are added" if config.embedding_norm else "")
    weights = "softmax(QKᵀ/√d_k)" if config.scale_scores else "softmax(QKᵀ)"
    hidden = {"relu": "max(0, xW₁+b₁)"}.get(config.activation, f"{config.activation}(xW₁+b₁)")
    if config.gated_ffn:
        hidden = f"{config.activation}(xW₁) ⊙ xW₃"
    stages = [Stage("encoder", "source token ids", (1, s), "pieces + </s>"),
              Stage("encoder", embedding, (1, s, d), lookup),
              Stage("encoder", f"+ positional encoding ({config.positional})", (1, s, d), f"PE table ({s}, {d})")
              if config.positional in INPUT_POSITIONS else
              Stage("encoder", f"no positional encoding added ({config.positional}: in the self-attention scores)",
                    (1, s, d))]
    for i in range(config.encoder_layers):
        layer = f"encoder layer {i + 1}"
        stages += [Stage(layer, "Q, K, V (split into heads)", (1, h, s, dk), f"{h} heads × d_k = {dk}"),
                   Stage(layer, f"self-attention weights {weights}", (1, h, s, s), "padding mask"),
                   Stage(layer, "heads concatenated, × W_O", (1, s, d), norm),
                   Stage(layer, f"feed-forward hidden {hidden}", (1, s, ff)),
                   Stage(layer, "feed-forward output", (1, s, d), norm)]
    if config.norm == "pre":
        stages.append(Stage("encoder", f"final {name} (pre-LN)", (1, s, d)))
    stages += [Stage("decoder", "decoder input ids (<s> y₁ … )", (1, t), "shifted right"),
               Stage("decoder", f"{embedding} + PE" if config.positional in INPUT_POSITIONS else embedding, (1, t, d))]
    for i in range(config.decoder_layers):
        layer = f"decoder layer {i + 1}"
        stages += [Stage(layer, "masked self-attention weights", (1, h, t, t), "causal + padding mask"),
                   Stage(layer, "heads concatenated, × W_O", (1, t, d), norm),
                   Stage(layer, "cross-attention Q from decoder, K/V from encoder", (1, h, s, dk),
                         f"K, V of the encoder output ({s} positions)"),
                   Stage(layer, "cross-attention weights", (1, h, t, s), "source padding mask"),
                   Stage(layer, "heads concatenated, × W_O", (1, t, d), norm),
                   Stage(layer, "feed-forward hidden", (1, t, ff)),
                   Stage(layer, "feed-forward output", (1, t, d), norm)]
    if config.norm == "pre":
        stages.append(Stage("decoder", f"final {name} (pre-LN)", (1, t, d)))
    tied = "tied to the embedding" if config.share_embeddings and config.tied_head else "its own matrix"
    if config.head_rescale:
        tied += ", input × d_model^-0.5"
    stages += [Stage("output", "logits (linear, " + tied + ")", (1, t, v)),
               Stage("output", "softmax: next-token probabilities", (1, t, v))]
    return stages
