"""What a run minimises: a translator's label-smoothed loss given the source, a language model's next-token loss under
its causal mask, an encoder's masked-token loss (`mlm_objective`); and the mean negative log-likelihood of a data set
(validation)."""

from __future__ import annotations

import torch
from torch import nn

from ..config.recipe import label_smoothed_loss
from ..nn.causal_lm import CausalLM
from ..nn.encoder_lm import MaskedLM
from ..nn.model import Transformer
from ..tokenization.tokenizer import PAD_ID
from .data import Batch, EncodedPairs, collate, make_batches
from .mlm_objective import HELD_OUT, MaskedTokenLoss, draw_seed, masked_batch

Network = Transformer | CausalLM | MaskedLM


class LabelSmoothedLoss(nn.Module):
    """The model's summed label-smoothed loss (`label_smoothed_loss`) and plain NLL over non-padding target positions;
    only those positions go through the output projection."""

    def __init__(self, model: Transformer, smoothing: float) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.model.encode(src)
        hidden = self.model.decode(tgt_in, encoded).hidden
        keep = tgt_out != PAD_ID
        return label_smoothed_loss(self.model.logits(hidden[keep]), tgt_out[keep], self.smoothing)


class NextTokenLoss(nn.Module):
    """A language model's summed label-smoothed loss and plain NLL of each next token of ``<s> y`` (that is
    ``y </s>``), under the causal mask; the source is None. Padding sits after each line, where no earlier
    position can see it, and its positions are left out of the sums."""

    def __init__(self, model: CausalLM, smoothing: float) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing

    def forward(self, src: None, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = tgt_out != PAD_ID
        return label_smoothed_loss(self.model(tgt_in).logits[keep], tgt_out[keep], self.smoothing)


def objective(model: Network, smoothing: float) -> nn.Module:
    """The loss module that trains `model`: `NextTokenLoss` for a `CausalLM`, `MaskedTokenLoss` for a `MaskedLM`,
    else `LabelSmoothedLoss`."""
    if isinstance(model, MaskedLM):
        return MaskedTokenLoss(model, smoothing)
    return NextTokenLoss(model, smoothing) if isinstance(model, CausalLM) else LabelSmoothedLoss(model, smoothing)


def make_batch(model: Network, data: EncodedPairs, indices: list[int], seed: int, *key: int) -> Batch:
    """The batch of `indices` that `objective(model)` reads: an encoder's with its masks drawn from (`seed`, `key`)
    (a resumed run draws the same), else `collate`'s."""
    if isinstance(model, MaskedLM):
        return masked_batch(data, indices, model.config.vocab_size, draw_seed(seed, *key))
    return collate(data, indices)


@torch.no_grad()
def mean_nll(model: Network, data: EncodedPairs, batch_tokens: int, seed: int, device: torch.device) -> float:
    """The negative log-likelihood per target token of `data` (in eval mode, batches of about `batch_tokens`)."""
    model.eval()
    total, tokens = 0.0, 0
    loss = objective(model, 0.0)
    for number, indices in enumerate(make_batches(data, batch_tokens, seed, 0)):
        batch = make_batch(model, data, indices, seed, HELD_OUT, number).to(device)  # the same masks every time
        _, nll = loss(batch.src, batch.tgt_in, batch.tgt_out)
        total += float(nll)
        tokens += batch.target_tokens
    return total / max(tokens, 1)
