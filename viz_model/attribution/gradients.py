"""Gradient attributions of each output token's log-probability to the source tokens and the target prefix.

The model is teacher-forced on the output (decoder inputs ``<s> y_1 .. y_{n-1}``); output token i's score is
``log p(y_i | source, y_<i)``, or in contrastive mode ``log p(y_i) - log p(foil)``: why this token and not the foil.
Gradients are taken with respect to the scaled token embeddings (``Embedding(id) * sqrt(d_model)``, before the
positional encodings, which stay):

- **saliency**: ``||grad||_2`` per token (how sensitive the score is to the token; never negative);
- **input x gradient**: ``sum_d e_d * grad_d`` (signed: the first-order change when the token is zeroed);
- **integrated gradients** (Sundararajan et al., 2017): ``sum_d e_d * mean over the path of grad_d`` from the
  all-zero embeddings to the real ones, by Gauss-Legendre quadrature; complete: the attributions of every
  source and prefix token add up to ``score(input) - score(baseline)``, and the gap is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..model import Transformer

GRADIENT_METHODS = ("saliency", "input_x_gradient", "integrated_gradients")
DEFAULT_STEPS = 32
MAX_STEPS = 256


@dataclass
class GradientResult:
    """Per method ``(outputs, src_len + tgt_len)`` (source columns first); integrated gradients' completeness."""

    scores: dict[str, np.ndarray]
    steps: int
    completeness_gap: np.ndarray | None  # per output: |sum of IG - (score(input) - score(baseline))|
    score_change: np.ndarray | None  # per output: score(input) - score(baseline)

    @property
    def relative_gap(self) -> np.ndarray | None:
        """The completeness gap relative to the score change (0.01 = 1%)."""
        if self.completeness_gap is None or self.score_change is None:
            return None
        return self.completeness_gap / np.maximum(np.abs(self.score_change), 1e-9)


def check_steps(steps: object) -> int:
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"integrated-gradient steps must be an integer from 1 to {MAX_STEPS}, got {steps!r}")
    return steps


def output_scores(network: Transformer, src: Tensor, tgt: Tensor, output_ids: Tensor,
                  source_embeddings: Tensor, target_embeddings: Tensor, foil: int | None = None) -> Tensor:
    """``(batch, outputs)``: each output token's log-probability (minus the foil's) given these embeddings."""
    out = network(src.expand(source_embeddings.shape[0], -1), tgt.expand(target_embeddings.shape[0], -1),
                  source_embeddings=source_embeddings, target_embeddings=target_embeddings)
    log_probs = torch.log_softmax(out.logits.to(torch.promote_types(out.logits.dtype, torch.float32)), dim=-1)
    index = output_ids.expand(log_probs.shape[0], -1)[..., None]
    scores = log_probs.gather(-1, index)[..., 0]
    if foil is not None:
        scores = scores - log_probs[..., foil]
    return scores


def state_gradients(network: Transformer, states: Tensor, output_ids: Tensor, foil: int | None = None,
                    weights: Tensor | None = None) -> Tensor:
    """``(batch, outputs, d_model)``: the gradient of output i's score with respect to the decoder's output state at
    position i, from the output layer's formula instead of a backward pass through it: with ``p = softmax(logits)``
    and the output matrix W, ``d log p(y) / d h = W[y] - p W`` (contrastive: ``W[y] - W[foil]``); the output bias
    and the never-emitted ids (probability 0) drop out. Scaled by `weights` ``(batch,)`` (quadrature)."""
    matrix = network.tgt_embedding.weight if network.output_projection is None else network.output_projection.weight
    with torch.no_grad():
        matrix = matrix.to(torch.promote_types(matrix.dtype, torch.float32))
        chosen = matrix[output_ids][None]  # (1, outputs, d_model)
        if foil is not None:
            grads = (chosen - matrix[foil]).expand(states.shape[0], -1, -1)
        else:  # one batch row at a time: the probabilities of a whole IG batch would be outputs x vocab x 32 floats
            grads = torch.stack([chosen[0] - torch.softmax(network.logits(row).to(matrix.dtype), dim=-1) @ matrix
                                 for row in states])
        return grads if weights is None else grads * weights[:, None, None]


def _per_output_gradients(states: Tensor, grads: Tensor, inputs: tuple[Tensor, Tensor]) -> list[tuple[Tensor, Tensor]]:
    """For each output i, the gradient of its score (summed over the batch) with respect to both embeddings: the
    backward pass from the decoder's states, with `grads` ``(batch, outputs, d_model)`` entering at position i.
    One sentence (batch 1): every output's backward at once (vmap over the outputs)."""
    count = grads.shape[1]
    if states.shape[0] == 1:
        entering = torch.zeros(count, *states.shape, dtype=states.dtype, device=states.device)
        entering[torch.arange(count), :, torch.arange(count)] = grads.transpose(0, 1).to(states.dtype)
        source, target = torch.autograd.grad(states, inputs, grad_outputs=entering, is_grads_batched=True)
        return list(zip(source, target))
    result = []
    for i in range(count):
        entering = torch.zeros_like(states)
        entering[:, i] = grads[:, i]
        result.append(torch.autograd.grad(states, inputs, grad_outputs=entering, retain_graph=i + 1 < count))
    return result


def gauss_legendre(steps: int) -> tuple[Tensor, Tensor]:
    """Nodes in (0, 1) and weights (summing to 1) of `steps`-point Gauss-Legendre quadrature."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    return torch.tensor((nodes + 1) / 2), torch.tensor(weights / 2)


def gradient_attributions(network: Transformer, source_ids: list[int], output_ids: list[int],
                          methods: tuple[str, ...] = GRADIENT_METHODS, steps: int = DEFAULT_STEPS,
                          foil: int | None = None) -> GradientResult:
    """The chosen `methods` for every output token of `output_ids` (ending in ``</s>``) given `source_ids`."""
    unknown = [m for m in methods if m not in GRADIENT_METHODS]
    if unknown:
        raise ValueError(f"unknown gradient method {unknown[0]!r}; choose from {', '.join(GRADIENT_METHODS)}")
    steps = check_steps(steps)
    if foil is not None and not 0 <= foil < network.config.vocab_size:
        raise ValueError(f"the foil must be a piece id from 0 to {network.config.vocab_size - 1}, got {foil}")
    if network.training:
        raise ValueError("attribute with the network in eval mode (dropout would make the gradients random)")
    device = next(network.parameters()).device
    src = torch.tensor([source_ids], device=device)
    tgt = torch.tensor([[network.config.bos_id, *output_ids[:-1]]], device=device)
    outputs = torch.tensor([output_ids], device=device)
    scores: dict[str, np.ndarray] = {}
    gap = change = None
    with torch.enable_grad():
        e_src = network.token_embeddings(src, "source").detach()
        e_tgt = network.token_embeddings(tgt, "target").detach()
        if {"saliency", "input_x_gradient"} & set(methods):
            inputs = (e_src.clone().requires_grad_(), e_tgt.clone().requires_grad_())
            states = network.teacher_forced(src, tgt, source_embeddings=inputs[0], target_embeddings=inputs[1])[1]
            grads = _per_output_gradients(states.hidden, state_gradients(network, states.hidden, outputs[0], foil),
                                          inputs)
            if "saliency" in methods:
                scores["saliency"] = np.stack([_joined(g_s.norm(dim=-1), g_t.norm(dim=-1)) for g_s, g_t in grads])
            if "input_x_gradient" in methods:
                scores["input_x_gradient"] = np.stack([_joined((e_src * g_s).sum(-1), (e_tgt * g_t).sum(-1))
                                                       for g_s, g_t in grads])
        if "integrated_gradients" in methods:
            nodes, weights = (t.to(device, e_src.dtype) for t in gauss_legendre(steps))
            inputs = ((nodes[:, None, None] * e_src).requires_grad_(), (nodes[:, None, None] * e_tgt).requires_grad_())
            states = network.teacher_forced(src.expand(steps, -1), tgt.expand(steps, -1),
                                            source_embeddings=inputs[0], target_embeddings=inputs[1])[1].hidden
            grads = _per_output_gradients(states, state_gradients(network, states, outputs[0], foil, weights),
                                          inputs)
            # the gradient of sum_k w_k f(a_k e) with respect to a_k e is w_k grad f(a_k e): summed over k, the
            # quadrature of the path integral of the gradient
            ig = np.stack([_joined((e_src * g_s.sum(0, keepdim=True)).sum(-1),
                                   (e_tgt * g_t.sum(0, keepdim=True)).sum(-1)) for g_s, g_t in grads])
            scores["integrated_gradients"] = ig
            with torch.no_grad():
                actual = output_scores(network, src, tgt, outputs, e_src, e_tgt, foil)[0]
                baseline = output_scores(network, src, tgt, outputs, torch.zeros_like(e_src), torch.zeros_like(e_tgt),
                                         foil)[0]
            change = (actual - baseline).cpu().numpy().astype(np.float64)
            gap = np.abs(ig.sum(axis=1) - change)
    return GradientResult(scores, steps, gap, change)


def _joined(source: Tensor, target: Tensor) -> np.ndarray:
    """One output's per-token values, source tokens then prefix tokens, as float64."""
    return torch.cat([source[0], target[0]]).detach().double().cpu().numpy()
