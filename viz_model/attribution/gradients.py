"""Gradient attributions of each output token's log-probability to the source tokens and the target prefix.

The model is teacher-forced on the output (decoder inputs ``<s> y_1 .. y_{n-1}``); output token i's score is
``log p(y_i | source, y_<i)``, or in contrastive mode ``log p(y_i) - log p(foil)``: why this token and not the foil.
Gradients are taken with respect to the scaled token embeddings (``Embedding(id) * sqrt(d_model)``, before the
positional encodings, which stay):

- **saliency**: ``||grad||_2`` per token (how sensitive the score is to the token; never negative);
- **input x gradient**: ``sum_d e_d * grad_d`` (signed: the first-order change when the token is zeroed);
- **integrated gradients** (Sundararajan et al., 2017): ``sum_d e_d * mean over the path of grad_d`` from the
  all-zero embeddings to the real ones; complete: the attributions of every source and prefix token add up to
  ``score(input) - score(baseline)``, and the gap is reported per output token.

Integrated gradients are adaptive by default: the trapezoid rule on 17 evenly spaced points of the path, then 16
midpoints at a time in the intervals whose own completeness is worst (the score is known at every point, so each
interval's error is exact), until every output's gap is within `tolerance` of its score change or `steps` points
are used. ReLU layers make the gradient jump along the path, so evenly spaced rules converge slowly; typical
sentences of the shipped model need 80-150 points for 1%. ``tolerance=0``: `steps`-point Gauss-Legendre, fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..config.checks import check_int
from ..kinds.encoder import EncoderModel
from ..kinds.language_model import LanguageModel
from ..nn.causal_lm import CausalLM
from ..nn.encoder_lm import MaskedLM
from ..nn.model import Transformer

ForcedPasses = LanguageModel | EncoderModel  # a self-attention model's door: forced_pass, embeddings
GRADIENT_METHODS = ("saliency", "input_x_gradient", "integrated_gradients")
DEFAULT_STEPS = 256  # the most points integrated gradients may use (adaptive), or the points (tolerance 0)
MAX_STEPS = 256
DEFAULT_TOLERANCE = 0.01  # adaptive integrated gradients stop when every output's gap is at most 1% of its change
MAX_TOLERANCE = 0.5
START_POINTS = 17  # adaptive: evenly spaced points first (the path's ends included)
ROUND_POINTS = 16  # adaptive: midpoints added per round
BATCH_POINTS = 32  # points of the path evaluated in one batch (memory: their activations and gradients)


@dataclass
class GradientResult:
    """Per method ``(outputs, src_len + tgt_len)`` (source columns first); integrated gradients' completeness."""

    scores: dict[str, np.ndarray]
    steps: int  # the points of the path integrated gradients used
    completeness_gap: np.ndarray | None  # per output: |sum of IG - (score(input) - score(baseline))|
    score_change: np.ndarray | None  # per output: score(input) - score(baseline)
    tolerance: float = 0.0  # the relative gap adaptive integrated gradients aimed for (0: fixed Gauss-Legendre)

    @property
    def relative_gap(self) -> np.ndarray | None:
        """The completeness gap relative to the score change (0.01 = 1%)."""
        if self.completeness_gap is None or self.score_change is None:
            return None
        return self.completeness_gap / np.maximum(np.abs(self.score_change), 1e-9)


def check_steps(steps: object) -> int:
    return check_int("steps", steps, 1, MAX_STEPS, error=ValueError,
                     message=f"integrated-gradient steps must be an integer from 1 to {MAX_STEPS}, got {steps!r}")


def check_tolerance(tolerance: object, steps: int = MAX_STEPS) -> float:
    """The relative completeness gap adaptive integrated gradients aim for: 0 (fixed rule) up to 0.5; adaptive
    needs the path's two ends, so at least 2 steps."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 <= tolerance <= MAX_TOLERANCE:
        raise ValueError(f"the integrated-gradient tolerance must be a number from 0 (fixed steps) to {MAX_TOLERANCE} "
                         f"(a relative completeness gap: 0.01 = 1%), got {tolerance!r}")
    if tolerance and steps < 2:
        raise ValueError("adaptive integrated gradients need at least 2 steps (the ends of the path); pass "
                         "tolerance 0 for a fixed one-point rule")
    return float(tolerance)


def completeness_note(points: int, tolerance: float, relative_gap: np.ndarray) -> tuple[str, bool]:
    """What integrated gradients' completeness says about these attributions, and whether every output's gap is
    within the target (`tolerance`, or the default's for a fixed rule); advice only where a setting can still help."""
    worst = int(relative_gap.argmax())
    largest = f"{relative_gap[worst]:.2%} (output token {worst})"
    target = tolerance or DEFAULT_TOLERANCE
    if relative_gap.max() <= target:
        how = (f"adaptively, until every gap was within {tolerance:.1%}" if tolerance else "fixed")
        return (f"Integrated gradients used {points} points on the path ({how}); the largest completeness gap is "
                f"{largest}."), True
    if not tolerance:
        return (f"Integrated gradients used {points} fixed points; the largest completeness gap is {largest}, above "
                f"{target:.0%}. The adaptive rule puts the points where the gradient jumps (ReLU layers) and reaches "
                f"{target:.0%} on typical sentences with at most {MAX_STEPS}."), False
    if points < MAX_STEPS:
        return (f"Integrated gradients used all {points} points allowed; the largest completeness gap is {largest}, "
                f"above the {tolerance:.1%} target. Allow more points (up to {MAX_STEPS}) for a smaller gap."), False
    return (f"Integrated gradients used {points} points, the most there are; the largest completeness gap is still "
            f"{largest}, above the {tolerance:.1%} target: that token's attributions are approximate by about that "
            "share of its score change (ReLU layers make the gradient jump along the path)."), False


def output_scores(network: Transformer, src: Tensor, tgt: Tensor, output_ids: Tensor,
                  source_embeddings: Tensor, target_embeddings: Tensor, foil: int | None = None) -> Tensor:
    """``(batch, outputs)``: each output token's log-probability (minus the foil's) given these embeddings."""
    out = network(src.expand(source_embeddings.shape[0], -1), tgt.expand(target_embeddings.shape[0], -1),
                  source_embeddings=source_embeddings, target_embeddings=target_embeddings)
    return _scores(torch.log_softmax(out.logits.to(torch.promote_types(out.logits.dtype, torch.float32)), dim=-1),
                   output_ids, foil)


def _scores(log_probs: Tensor, output_ids: Tensor, foil: int | None) -> Tensor:
    """``(batch, outputs)`` scores from the log-probabilities ``(batch, outputs, vocab)``."""
    index = output_ids.expand(log_probs.shape[0], -1)[..., None]
    scores = log_probs.gather(-1, index)[..., 0]
    if foil is not None:
        scores = scores - log_probs[..., foil]
    return scores


def state_gradients(network: Transformer, states: Tensor, output_ids: Tensor, foil: int | None = None,
                    with_scores: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """``(batch, outputs, d_model)``: the gradient of output i's score with respect to the decoder's output state at
    position i, from the output layer's formula instead of a backward pass through it: with ``p = softmax(logits)``
    and the output matrix W, ``d log p(y) / d h = W[y] - p W`` (contrastive: ``W[y] - W[foil]``); the output bias
    and the never-emitted ids (probability 0) drop out. `with_scores`: also the scores ``(batch, outputs)``, from
    the same logits (one vocabulary projection per point)."""
    matrix = network.tgt_embedding.weight if network.output_projection is None else network.output_projection.weight
    with torch.no_grad():
        matrix = matrix.to(torch.promote_types(matrix.dtype, torch.float32))
        chosen = matrix[output_ids][None]  # (1, outputs, d_model)
        contrastive = (chosen - matrix[foil]).expand(states.shape[0], -1, -1) if foil is not None else None
        if contrastive is not None and not with_scores:
            return contrastive
        # one batch row at a time: the probabilities of a whole batch would be outputs x vocab x points floats
        grads, scores = [], []
        for row in states:
            logits = network.logits(row).to(matrix.dtype)
            if contrastive is None:
                grads.append(chosen[0] - torch.softmax(logits, dim=-1) @ matrix)
            if with_scores:
                scores.append(_scores(torch.log_softmax(logits, dim=-1)[None], output_ids, foil)[0])
        found = contrastive if contrastive is not None else torch.stack(grads)
        return (found, torch.stack(scores)) if with_scores else found


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


class _Path:
    """The straight path from all-zero token embeddings to the real ones, evaluated where integrated gradients ask:
    at each point alpha, every output's score and each token's ``e . grad score(alpha e)``."""

    def __init__(self, network: Transformer, src: Tensor, tgt: Tensor, outputs: Tensor, foil: int | None) -> None:
        self.network, self.src, self.tgt, self.outputs, self.foil = network, src, tgt, outputs, foil
        self.e_src = network.token_embeddings(src, "source").detach()
        self.e_tgt = network.token_embeddings(tgt, "target").detach()
        self.like = self.e_src  # the dtype and device of the path's points
        self.points: dict[float, tuple[np.ndarray, np.ndarray]] = {}  # alpha -> (scores, products)

    def add(self, alphas: Sequence[float]) -> None:
        """Evaluate the path at `alphas`, `BATCH_POINTS` at a time."""
        for first in range(0, len(alphas), BATCH_POINTS):
            chunk = list(alphas[first:first + BATCH_POINTS])
            scores, products = self._evaluate(torch.tensor(chunk, dtype=self.like.dtype, device=self.like.device))
            self.points.update(zip(chunk, zip(scores, products)))

    def _evaluate(self, alphas: Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Scores ``(points, outputs)`` and products ``(points, outputs, src_len + tgt_len)`` at `alphas`."""
        scale = alphas[:, None, None]
        inputs = ((scale * self.e_src).requires_grad_(), (scale * self.e_tgt).requires_grad_())
        states = self.network.teacher_forced(self.src.expand(len(alphas), -1), self.tgt.expand(len(alphas), -1),
                                             source_embeddings=inputs[0], target_embeddings=inputs[1])[1].hidden
        entering, scores = state_gradients(self.network, states, self.outputs[0], self.foil, with_scores=True)
        grads = _per_output_gradients(states, entering, inputs)
        products = torch.stack([torch.cat([(self.e_src * g_s).sum(-1), (self.e_tgt * g_t).sum(-1)], dim=-1)
                                for g_s, g_t in grads], dim=1)
        return scores.detach().double().cpu().numpy(), products.detach().double().cpu().numpy()

    def end_scores(self, scale: float) -> Tensor:
        """``(outputs,)`` the scores at one point of the path (0: the baseline, 1: the input)."""
        with torch.no_grad():
            return output_scores(self.network, self.src, self.tgt, self.outputs, scale * self.e_src,
                                 scale * self.e_tgt, self.foil)[0]

    def sorted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The points in path order: alphas, scores ``(points, outputs)``, products ``(points, outputs, tokens)``."""
        alphas = sorted(self.points)
        return (np.array(alphas), np.stack([self.points[a][0] for a in alphas]),
                np.stack([self.points[a][1] for a in alphas]))


def _gauss_legendre_ig(path: _Path, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Integrated gradients ``(outputs, tokens)`` by `steps`-point Gauss-Legendre, and the score change."""
    nodes, weights = gauss_legendre(steps)
    path.add(nodes.tolist())
    products = np.stack([path.points[a][1] for a in nodes.tolist()])
    ends = [path.end_scores(scale) for scale in (1.0, 0.0)]
    return np.tensordot(weights.numpy(), products, axes=1), (ends[0] - ends[1]).double().cpu().numpy()


def _adaptive_ig(path: _Path, steps: int, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Integrated gradients ``(outputs, tokens)`` by the adaptive trapezoid rule (see the module's docstring), and
    the score change."""
    path.add(np.linspace(0.0, 1.0, min(START_POINTS, steps)).tolist())
    while True:
        alphas, scores, products = path.sorted()
        intervals = np.diff(alphas)[:, None, None] * (products[1:] + products[:-1]) / 2  # (intervals, outputs, tokens)
        change = scores[-1] - scores[0]
        scale = np.maximum(np.abs(change), 1e-9)
        ig = intervals.sum(axis=0)
        if (np.abs(ig.sum(axis=-1) - change) / scale).max() <= tolerance or len(alphas) >= steps:
            return ig, change
        # each interval's own completeness: its attributions against the score change across it, exactly
        local = (np.abs(intervals.sum(axis=-1) - np.diff(scores, axis=0)) / scale).max(axis=-1)
        worst = np.argsort(-local, kind="stable")[:min(ROUND_POINTS, steps - len(alphas))]
        path.add([(alphas[k] + alphas[k + 1]) / 2 for k in sorted(worst)])


def gradient_attributions(network: Transformer, source_ids: list[int], output_ids: list[int],
                          methods: tuple[str, ...] = GRADIENT_METHODS, steps: int = DEFAULT_STEPS,
                          foil: int | None = None, tolerance: float = DEFAULT_TOLERANCE) -> GradientResult:
    """The chosen `methods` for every output token of `output_ids` (ending in ``</s>``) given `source_ids`.
    Integrated gradients use at most `steps` points, adaptively until every output's completeness gap is within
    `tolerance` of its score change (0: exactly `steps` Gauss-Legendre points)."""
    steps, tolerance = check_settings(network, methods, steps, foil, tolerance)
    device = next(network.parameters()).device
    src = torch.tensor([source_ids], device=device)
    tgt = torch.tensor([[network.config.bos_id, *output_ids[:-1]]], device=device)
    outputs = torch.tensor([output_ids], device=device)
    scores: dict[str, np.ndarray] = {}
    with torch.enable_grad():
        path = _Path(network, src, tgt, outputs, foil)
        if {"saliency", "input_x_gradient"} & set(methods):
            e_src, e_tgt = path.e_src, path.e_tgt
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
            return integrated(path, scores, steps, tolerance)
    return GradientResult(scores, 0, None, None, tolerance)


def check_settings(network: Transformer | CausalLM | MaskedLM, methods: tuple[str, ...], steps: int, foil: int | None,
                   tolerance: float) -> tuple[int, float]:
    """`steps` and `tolerance` checked (with the methods, the foil and the network's mode), one line at fault."""
    unknown = [m for m in methods if m not in GRADIENT_METHODS]
    if unknown:
        raise ValueError(f"unknown gradient method {unknown[0]!r}; choose from {', '.join(GRADIENT_METHODS)}")
    steps = check_steps(steps)
    tolerance = check_tolerance(tolerance, steps)
    if foil is not None and not 0 <= foil < network.config.vocab_size:
        raise ValueError(f"the foil must be a piece id from 0 to {network.config.vocab_size - 1}, got {foil}")
    if network.training:
        raise ValueError("attribute with the network in eval mode (dropout would make the gradients random)")
    return steps, tolerance


def integrated(path: _Path, scores: dict[str, np.ndarray], steps: int, tolerance: float) -> GradientResult:
    """`scores` with integrated gradients along `path` added (adaptive to `tolerance`, else `steps` fixed points)."""
    ig, change = _adaptive_ig(path, steps, tolerance) if tolerance else _gauss_legendre_ig(path, steps)
    scores["integrated_gradients"] = ig
    return GradientResult(scores, len(path.points), np.abs(ig.sum(axis=1) - change), change, tolerance)


def continuation_gradients(model: ForcedPasses, ids: list[int], rows: list[int], outputs: Tensor,
                           inputs: Tensor, foil: int | None) -> tuple[Tensor, list[Tensor]]:
    """A model's scores ``(batch, outputs)`` given the token embeddings `inputs` ``(batch, len, d_model)`` of `ids`,
    and per output the gradient of its score (summed over the batch) with respect to `inputs`. Output i is read at
    position ``rows[i]`` (a language model's: the positions before each continuation token; an encoder's: its mask
    tokens)."""
    logits = model.forced_pass(ids, token_embeddings=inputs).logits[:, rows]
    scores = _scores(torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1),
                     outputs, foil)
    count = scores.shape[1]
    return scores, [torch.autograd.grad(scores[:, i].sum(), inputs, retain_graph=i + 1 < count)[0]
                    for i in range(count)]


class ContinuationPath(_Path):
    """A self-attention model's path (a language model's, an encoder's): from all-zero token embeddings of every
    input position (so every column) to the real ones; the input positions stay."""

    def __init__(self, model: ForcedPasses, ids: list[int], rows: list[int], outputs: Tensor,
                 foil: int | None) -> None:
        self.model, self.ids, self.rows, self.outputs, self.foil = model, ids, rows, outputs, foil
        self.embedded = model.embeddings(ids).detach()
        self.like = self.embedded
        self.points = {}

    def _evaluate(self, alphas: Tensor) -> tuple[np.ndarray, np.ndarray]:
        inputs = (alphas[:, None, None] * self.embedded).requires_grad_()
        scores, grads = continuation_gradients(self.model, self.ids, self.rows, self.outputs, inputs, self.foil)
        products = torch.stack([(self.embedded * g).sum(-1) for g in grads], dim=1)
        return scores.detach().double().cpu().numpy(), products.detach().double().cpu().numpy()

    def end_scores(self, scale: float) -> Tensor:
        with torch.no_grad():
            logits = self.model.forced_pass(self.ids, token_embeddings=scale * self.embedded).logits
            log_probs = torch.log_softmax(logits[:, self.rows].float(), dim=-1)
            return _scores(log_probs, self.outputs, self.foil)[0]


def language_model_gradients(model: LanguageModel, prompt_ids: list[int], continuation_ids: list[int],
                             methods: tuple[str, ...] = GRADIENT_METHODS, steps: int = DEFAULT_STEPS,
                             foil: int | None = None, tolerance: float = DEFAULT_TOLERANCE) -> GradientResult:
    """`gradient_attributions` of a language model: each continuation token's score attributed to every input
    token before it, ``(continuation, prompt + continuation - 1)`` (the prompt's columns first)."""
    ids = [*prompt_ids, *continuation_ids[:-1]]
    first = len(prompt_ids) - 1
    return read_gradients(model, ids, list(range(first, first + len(continuation_ids))), continuation_ids, methods,
                          steps, foil, tolerance)


def read_gradients(model: ForcedPasses, ids: list[int], rows: list[int], output_ids: list[int],
                   methods: tuple[str, ...] = GRADIENT_METHODS, steps: int = DEFAULT_STEPS,
                   foil: int | None = None, tolerance: float = DEFAULT_TOLERANCE) -> GradientResult:
    """The gradient `methods` of a model read at positions `rows` of one pass over `ids`: output i's score (of id
    ``output_ids[i]`` at ``rows[i]``) attributed to every input token, ``(outputs, len(ids))``."""
    steps, tolerance = check_settings(model.network, methods, steps, foil, tolerance)
    outputs = torch.tensor([list(output_ids)], device=model.device)
    scores: dict[str, np.ndarray] = {}
    with torch.enable_grad():
        path = ContinuationPath(model, ids, rows, outputs, foil)
        if {"saliency", "input_x_gradient"} & set(methods):
            _, grads = continuation_gradients(model, ids, rows, outputs, path.embedded.clone().requires_grad_(), foil)
            if "saliency" in methods:
                scores["saliency"] = np.stack([g[0].norm(dim=-1).detach().double().cpu().numpy() for g in grads])
            if "input_x_gradient" in methods:
                scores["input_x_gradient"] = np.stack([(path.embedded[0] * g[0]).sum(-1).detach().double().cpu()
                                                       .numpy() for g in grads])
        if "integrated_gradients" in methods:
            return integrated(path, scores, steps, tolerance)
    return GradientResult(scores, 0, None, None, tolerance)


def _joined(source: Tensor, target: Tensor) -> np.ndarray:
    """One output's per-token values, source tokens then prefix tokens, as float64."""
    return torch.cat([source[0], target[0]]).detach().double().cpu().numpy()
