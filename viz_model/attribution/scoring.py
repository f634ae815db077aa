"""Scoring one translation with every chosen method: `attribute` (a loaded model and a text) and `attribute_ids` (a
network and ids), into an `Attribution`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..nn.arrays import to_numpy
from ..nn.kinds import ATTENTION_KINDS
from ..nn.model import Transformer
from .contributions import alti_blocks, alti_plus, rollout, value_weighted
from .gradients import (
    DEFAULT_STEPS,
    DEFAULT_TOLERANCE,
    GRADIENT_METHODS,
    GradientResult,
    check_steps,
    check_tolerance,
    gradient_attributions,
)
from .record import Attribution

CONTRIBUTION_METHODS = ("value_weighted", "alti")
METHODS = ("attention", "rollout", *CONTRIBUTION_METHODS, *GRADIENT_METHODS)
"""What `attribute` can compute (its `methods`)."""
DEFAULT_METHODS = ("attention", "rollout", "value_weighted", "alti", "saliency", "input_x_gradient")
"""What `attribute` computes unless told: every method but integrated gradients."""


def _float64(tensor: torch.Tensor) -> np.ndarray:
    return to_numpy(tensor, torch.float64)  # an attribution's arrays are float64


def check_methods(methods: Sequence[str]) -> tuple[str, ...]:
    """`methods` without repeats; an empty list or an unknown name raises `ValueError`."""
    if isinstance(methods, str) or not methods:
        raise ValueError(f"methods must be a non-empty list of {', '.join(METHODS)}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown attribution method {unknown[0]!r}; choose from {', '.join(METHODS)}")
    return tuple(dict.fromkeys(methods))


def attribute_ids(network: Transformer, source_ids: list[int], output_ids: list[int],
                  methods: Sequence[str] = DEFAULT_METHODS, steps: int = DEFAULT_STEPS, foil: int | None = None,
                  pieces: Any = None, tolerance: float = DEFAULT_TOLERANCE) -> Attribution:
    """Every chosen method for `output_ids` (ending in ``</s>``) teacher-forced on `source_ids` (ending in
    ``</s>``); `pieces` (id -> text, e.g. a tokenizer's ``pieces``) names the tokens. Integrated gradients: at most
    `steps` points, until every gap is within `tolerance` (see `gradients.gradient_attributions`)."""
    methods = check_methods(methods)
    steps = check_steps(steps)
    tolerance = check_tolerance(tolerance, steps)
    if network.training:
        raise ValueError("attribute with the network in eval mode (dropout would make every method random)")
    device = next(network.parameters()).device
    prefix = [network.config.bos_id, *output_ids[:-1]]
    src = torch.tensor([source_ids], device=device)
    tgt = torch.tensor([prefix], device=device)
    with torch.inference_mode():
        out = network(src, tgt, need_weights=True)
        log_probs = torch.log_softmax(out.logits[0].float(), dim=-1)
        chosen = log_probs[torch.arange(len(output_ids)), torch.tensor(output_ids, device=device)]
        vw = ({kind: [_float64(value_weighted(network, r, kind, i)[0]) for i, r in enumerate(out.records(kind))]
               for kind in ATTENTION_KINDS} if "value_weighted" in methods else {})
        alti = encoder_alti = None
        alti_layers: dict[str, list[np.ndarray]] = {}
        if "alti" in methods:
            blocks = alti_blocks(network, out)
            alti = _float64(alti_plus(network, out, blocks)[0])
            encoder_alti = _float64(rollout(blocks["encoder"])[0])
            alti_layers = {kind: [_float64(block[0]) for block in layers] for kind, layers in blocks.items()}
    gradient_methods = tuple(m for m in methods if m in GRADIENT_METHODS)
    grads = (gradient_attributions(network, source_ids, output_ids, gradient_methods, steps, foil, tolerance)
             if gradient_methods else GradientResult({}, 0, None, None))
    name = pieces or (lambda ids: [str(i) for i in ids])
    return Attribution(
        source_tokens=list(name(source_ids)), prefix_tokens=list(name(prefix)), output_tokens=list(name(output_ids)),
        source_ids=list(source_ids), output_ids=list(output_ids), log_probs=_float64(chosen),
        attentions=[_float64(a[0]) for a in out.cross_attentions],
        encoder_attentions=[_float64(a[0]) for a in out.encoder_attentions], value_weighted=vw, alti=alti,
        encoder_alti=encoder_alti, alti_layers=alti_layers, gradients=grads.scores, steps=grads.steps,
        completeness_gap=grads.completeness_gap, score_change=grads.score_change, tolerance=grads.tolerance,
        foil=None if foil is None else (name([foil])[0]))


def attribute(model: Any, text: str, target: str | None = None, methods: Sequence[str] = DEFAULT_METHODS,
              steps: int = DEFAULT_STEPS, foil: str | None = None, beam: int | None = None,
              alpha: float | None = None, rule: str | None = None, tolerance: float = DEFAULT_TOLERANCE
              ) -> Attribution:
    """Attributions of a `viz_model.TranslationModel`'s translation of `text` (searched by `rule` with `beam` and
    `alpha`, the model's own search by default; or of the forced `target`). Integrated gradients use at most
    `steps` points, adaptively until every output's completeness gap is within `tolerance` of its score change (the
    points used: ``result.steps``; the gaps: ``result.relative_gap``); ``tolerance=0``: `steps` fixed points.

    Input errors are those of `TranslationModel.trace` (empty, too long, ...). `foil`: one piece of the target
    vocabulary; the scores then explain ``log p(y_i) - log p(foil)`` (contrastive)."""
    methods = check_methods(methods)
    steps = check_steps(steps)
    tolerance = check_tolerance(tolerance, steps)
    foil_id = None
    if foil is not None:
        pieces = model.tokenizer.encode_target(str(foil).strip()) if str(foil).strip() else []
        if len(pieces) != 1:
            raise ValueError(f"the contrast word must be one piece of the vocabulary; {foil!r} is "
                             f"{len(pieces)} pieces ({' '.join(model.tokenizer.pieces(pieces)) or 'none'})")
        foil_id = pieces[0]
    trace = model.trace(text, beam=beam, alpha=alpha, target=target, top_k=1, rule=rule)
    result = attribute_ids(model.network, trace.source_ids, trace.output_ids, methods, steps, foil_id,
                           model.tokenizer.pieces, tolerance)
    result.model_name = model.name
    return result
