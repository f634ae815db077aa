"""The encoder-only masked language model (BERT, RoBERTa, DistilBERT, ELECTRA, ALBERT, ModernBERT, DeBERTa-v2 / v3),
instrumented as the translator is.

Token, learned position and token-type embeddings summed and normed (in `ModelConfig.embedding_size`, projected to
d_model where it differs), a stack of the translator's `EncoderLayer` (post-norm; pre-norm with a final norm for
ModernBERT), and the masked-LM head: dense, activation, norm, then the output projection tied to the token embeddings
with a bias of its own. Position is the learned table, or in the scores: RoPE with a base of its own in the layers
that see only a window of keys (ModernBERT), or DeBERTa's disentangled terms (`disentangled`). Every forward can
return each layer's `AttentionRecord`; nothing is stored on a module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..config import ModelConfig
from .attention import AttentionRecord, combine_masks
from .deberta_conv import EmbeddingConvolution
from .disentangled import DisentangledAttention, DisentangledPosition, RelativeEmbeddings
from .linear import Linear, linear
from .model import ACTIVATION_FUNCTIONS, EncoderLayer, with_cpu_storage
from .norms import make_norm, normed
from .positional import normal_embedding
from .rotary import Rotary
from .score_position import ScorePosition


@dataclass
class MaskedLMOutput:
    """What one `MaskedLM` call computed.

    :ivar logits: ``(batch, len, vocab)`` the scores of each position's token
    :ivar records: per layer, the self-attention's `AttentionRecord` (with ``need_weights``)
    :ivar positions: ``(batch, len)`` the position ids the embeddings read
    """

    logits: Tensor
    records: list[AttentionRecord] = field(default_factory=list)
    positions: Tensor | None = None

    @property
    def attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, len, len)``."""
        return [record.weights for record in self.records]


def band_mask(length: int, radius: int, device: torch.device) -> Tensor:
    """``(1, 1, len, len)``: query i may attend key j iff ``|i - j| <= radius`` (ModernBERT's local layers)."""
    ids = torch.arange(length, device=device)
    return ((ids[:, None] - ids[None, :]).abs() <= radius)[None, None]


def encoder_layer(cfg: ModelConfig, index: int) -> EncoderLayer:
    """Layer `index` of `cfg`'s stack: DeBERTa's disentangled attention in place of the plain one; ModernBERT's first
    layer without its attention norm."""
    layer = EncoderLayer(cfg)
    if cfg.positional == "disentangled":
        layer.self_attn = DisentangledAttention(cfg)
    if index == 0 and not cfg.first_attn_norm:
        layer.attn_residual.norm = nn.Identity()
    return layer


class MaskedLM(nn.Module):
    """An encoder-only Transformer with a masked-language-model head.

    :ivar config: its `ModelConfig` (kind "encoder")
    :ivar embedding: the token embeddings (the output projection's matrix too)
    :ivar positions: the learned position table added to the input, else None (RoPE; DeBERTa-v3)
    :ivar token_types: the token-type (segment) embeddings, else None
    :ivar embedding_norm: the norm of the summed embeddings
    :ivar projection: embedding_size to d_model where the config sets one (ELECTRA's embeddings_project, ALBERT's
        embedding_hidden_mapping_in, DeBERTa's embed_proj before the norm), else None
    :ivar layers: the `EncoderLayer` stack (ALBERT's: the layers the stack's depths share, `layer`)
    :ivar final_norm: the norm after the last pre-norm layer (ModernBERT), else None
    :ivar relative: DeBERTa's relative-position embeddings, else None
    :ivar convolution: DeBERTa-v2's convolution over the embeddings, added after the first layer, else None
    :ivar rotary: RoPE of the layers that see every key and of the windowed ones (ModernBERT), else None
    :ivar head_dense: the head's transform (d_model to embedding_size)
    :ivar head_norm: the head's norm
    :ivar head_bias: the output projection's bias
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.kind != "encoder":
            raise ValueError(f"MaskedLM builds an encoder-only model (config kind 'encoder'), got kind {cfg.kind!r}")
        self.config = cfg
        width = cfg.embedding_size or cfg.d_model
        self.embedding = normal_embedding(cfg.vocab_size, width, 0.02)
        table = cfg.positional == "learned" or cfg.position_biased_input
        self.positions = normal_embedding(cfg.max_positions, width, 0.02) if table else None
        self.token_types = normal_embedding(cfg.type_vocab_size, width, 0.02) if cfg.type_vocab_size else None
        self.embedding_norm = make_norm(cfg.d_model if cfg.project_before_norm else width, cfg.normalization,
                                        cfg.norm_eps)
        self.projection = Linear(width, cfg.d_model, bias=not cfg.project_before_norm) \
            if cfg.embedding_size is not None else None
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(encoder_layer(cfg, i) for i in range(cfg.shared_layers or cfg.encoder_layers))
        self.final_norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if cfg.norm == "pre" else None
        self.relative = RelativeEmbeddings(cfg) if cfg.positional == "disentangled" else None
        self.convolution = EmbeddingConvolution(cfg) if cfg.conv_kernel_size else None
        self.rotary = (Rotary(cfg.d_head, cfg.rope_base), Rotary(cfg.d_head, cfg.windowed_rope_base)) \
            if cfg.positional == "rope" else None
        self.head_dense = Linear(cfg.d_model, width)
        self.head_norm = make_norm(width, cfg.normalization, cfg.norm_eps)
        self.head_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.activation = ACTIVATION_FUNCTIONS[cfg.head_activation]

    @classmethod
    def for_loading(cls, cfg: ModelConfig) -> MaskedLM:
        """The model with uninitialised weights (built on the meta device, then given CPU storage)."""
        with torch.device("meta"):
            model = cls(cfg)
        return with_cpu_storage(model)

    def layer(self, depth: int) -> EncoderLayer:
        """The layer run at `depth` (ALBERT's groups: one stored layer for several depths, as transformers picks
        it)."""
        cfg = self.config
        if cfg.shared_layers is None:
            return self.layers[depth]  # type: ignore[return-value]
        return self.layers[int(depth / (cfg.encoder_layers / cfg.shared_layers))]  # type: ignore[return-value]

    @property
    def longest(self) -> int:
        """The most tokens one sequence can have: the position table's rows (RoBERTa's: less its pad id's and the
        rows before)."""
        cfg = self.config
        return cfg.max_positions - cfg.pad_id - 1 if cfg.pad_positions else cfg.max_positions

    def position_ids(self, ids: Tensor) -> Tensor:
        """``(batch, len)`` the rows of the position table each token reads: 0, 1, 2, ... or (RoBERTa) the count of
        tokens so far that are not the pad, after ``pad_id`` (a pad reads row pad_id)."""
        cfg = self.config
        if cfg.pad_positions:
            real = ids.ne(cfg.pad_id).long()
            return torch.cumsum(real, dim=1) * real + cfg.pad_id
        return torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)

    def token_embeddings(self, ids: Tensor) -> Tensor:
        """``(batch, len, embedding_size)`` the ids' embeddings, before positions and token types are added."""
        return self.embedding(ids)

    def embed(self, ids: Tensor, type_ids: Tensor | None = None, tokens: Tensor | None = None
              ) -> tuple[Tensor, Tensor]:
        """The first layer's input (`token_embeddings`, or `tokens` in their place, plus positions and token types,
        normed, projected) and the position ids; one line where the sequence is longer than the table."""
        positions = self.position_ids(ids)
        if ids.shape[1] > self.longest:
            raise ValueError(f"sequence of {ids.shape[1]} tokens exceeds the model's maximum of {self.longest} "
                             "positions (max_position_embeddings)")
        x = self.token_embeddings(ids) if tokens is None else tokens
        if self.positions is not None:
            x = x + self.positions(positions)
        if self.token_types is not None:
            x = x + self.token_types(torch.zeros_like(ids) if type_ids is None else type_ids)
        before = self.config.project_before_norm and self.projection is not None
        x = normed(self.embedding_norm, self.projection(x) if before else x)
        x = self.dropout(x) if self.training else x
        return (x if self.projection is None or before else self.projection(x)), positions

    def position_vectors(self, positions: Tensor) -> Tensor:
        """``(batch, len, embedding width)`` the position table's rows added to the input; zeros where position
        enters the scores alone (RoPE, DeBERTa-v3)."""
        if self.positions is None:
            width = self.config.embedding_size or self.config.d_model
            return torch.zeros(*positions.shape, width, device=positions.device)
        return self.positions(positions)

    def layer_positions(self, positions: Tensor, need_weights: bool
                        ) -> list[ScorePosition | DisentangledPosition | None]:
        """Per layer, how position enters its scores: RoPE's rotation (the windowed layers' own base), DeBERTa's
        relative positions, or None (the learned table)."""
        cfg = self.config
        if self.relative is not None:
            return [self.relative(positions.shape[1])] * cfg.encoder_layers
        if self.rotary is None:
            return [None] * cfg.encoder_layers
        schemes = [rotary.score_position(positions, positions, need_weights) for rotary in self.rotary]
        return [schemes[i in cfg.windowed_layers] for i in range(cfg.encoder_layers)]

    def layer_masks(self, mask: Tensor | None, length: int, device: torch.device) -> list[Tensor | None]:
        """Per layer, `mask` and, in the windowed layers, the band of keys within `window_radius`."""
        cfg = self.config
        if cfg.window_radius is None:
            return [mask] * cfg.encoder_layers
        band = combine_masks(mask, band_mask(length, cfg.window_radius, device))
        return [band if i in cfg.windowed_layers else mask for i in range(cfg.encoder_layers)]

    def forward(self, ids: Tensor, type_ids: Tensor | None = None, need_weights: bool = False,
                head_mask: Tensor | None = None, token_embeddings: Tensor | None = None,
                mask: Tensor | None = None) -> MaskedLMOutput:
        """Read `ids` ``(batch, len)`` (`type_ids`: their token types, default 0) and score every position's token.
        `need_weights`: each layer's record; `head_mask` ``(layers, heads)``: multipliers of each head's output (0
        switches it off); `token_embeddings` ``(batch, len, embedding_size)``: in place of the ids' own (gradients);
        `mask`: broadcastable to ``(batch, heads, len, len)``, True = may attend (padding), None: every key."""
        if ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"ids must be (batch, len) integer token ids, got {ids.dtype} {tuple(ids.shape)}")
        x, positions = self.embed(ids, type_ids, token_embeddings)
        out = MaskedLMOutput(x, positions=positions)
        schemes, masks = self.layer_positions(positions, need_weights), self.layer_masks(mask, ids.shape[1], x.device)
        embedded = x
        for i in range(self.config.encoder_layers):
            x, record = self.layer(i)(x, masks[i], need_weights, None if head_mask is None else head_mask[i],
                                      schemes[i])
            if i == 0 and self.convolution is not None:
                x = self.convolution(embedded, x, mask)
            if record is not None:
                out.records.append(record)
        out.logits = self.logits(x if self.final_norm is None else normed(self.final_norm, x))
        return out

    def logits(self, hidden: Tensor) -> Tensor:
        """The masked-LM head: dense, activation, norm, then the tied output projection and its bias."""
        h = normed(self.head_norm, self.activation(self.head_dense(hidden)))
        return linear(h, self.embedding.weight, self.head_bias)

    def num_parameters(self) -> int:
        """Parameters, the tied output projection counted once."""
        return sum(p.numel() for p in self.parameters())
