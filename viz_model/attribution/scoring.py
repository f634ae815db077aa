"""Scoring one translation with every chosen method: `attribute` (a loaded model and a text) and `attribute_ids` (a
network and ids), into an `Attribution`; a language model's continuation of a prompt: `attribute_continuation`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..kinds.base import ModelKind, PerKind
from ..kinds.language_model import LanguageModel
from ..kinds.translator import TranslationModel
from ..nn.arrays import to_numpy
from ..nn.kinds import ATTENTION_KINDS
from ..nn.model import Transformer
from .contributions import alti_blocks, alti_plus, rollout, sandwich_norm_layer, self_alti, value_weighted
from .gradients import (
    DEFAULT_STEPS,
    DEFAULT_TOLERANCE,
    GRADIENT_METHODS,
    GradientResult,
    check_steps,
    check_tolerance,
    gradient_attributions,
    language_model_gradients,
)
from .long_prompt import value_weighted_rows
from .record import Attribution

CONTRIBUTION_METHODS = ("value_weighted", "alti")
METHODS = ("attention", "rollout", *CONTRIBUTION_METHODS, *GRADIENT_METHODS)
"""What `attribute` can compute (its `methods`)."""
DEFAULT_METHODS = ("attention", "rollout", "value_weighted", "alti", "saliency", "input_x_gradient")
"""What `attribute` computes unless told: every method but integrated gradients."""
CROSS_METHODS = ("attention", "rollout")
"""The methods that read cross-attention: a language model (decoder-only) has none."""
LANGUAGE_MODEL_DEFAULTS = tuple(m for m in DEFAULT_METHODS if m not in CROSS_METHODS)
"""What `attribute` computes for a language model unless told."""


def float64_array(tensor: torch.Tensor) -> np.ndarray:
    """`tensor` as a float64 array (an attribution's arrays are float64)."""
    return to_numpy(tensor, torch.float64)


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
        vw = ({kind: [float64_array(value_weighted(network, r, kind, i)[0]) for i, r in enumerate(out.records(kind))]
               for kind in ATTENTION_KINDS} if "value_weighted" in methods else {})
        alti = encoder_alti = None
        alti_layers: dict[str, list[np.ndarray]] = {}
        if "alti" in methods:
            blocks = alti_blocks(network, out)
            alti = float64_array(alti_plus(network, out, blocks)[0])
            encoder_alti = float64_array(rollout(blocks["encoder"])[0])
            alti_layers = {kind: [float64_array(block[0]) for block in layers] for kind, layers in blocks.items()}
    gradient_methods = tuple(m for m in methods if m in GRADIENT_METHODS)
    grads = (gradient_attributions(network, source_ids, output_ids, gradient_methods, steps, foil, tolerance)
             if gradient_methods else GradientResult({}, 0, None, None))
    name = pieces or (lambda ids: [str(i) for i in ids])
    return Attribution(
        source_tokens=list(name(source_ids)), prefix_tokens=list(name(prefix)), output_tokens=list(name(output_ids)),
        source_ids=list(source_ids), output_ids=list(output_ids), log_probs=float64_array(chosen),
        attentions=[float64_array(a[0]) for a in out.cross_attentions],
        encoder_attentions=[float64_array(a[0]) for a in out.encoder_attentions], value_weighted=vw, alti=alti,
        encoder_alti=encoder_alti, alti_layers=alti_layers, gradients=grads.scores, steps=grads.steps,
        completeness_gap=grads.completeness_gap, score_change=grads.score_change, tolerance=grads.tolerance,
        foil=None if foil is None else (name([foil])[0]))


def attribute_continuation(model: LanguageModel, prompt: str, continuation: str | None = None,
                           methods: Sequence[str] = LANGUAGE_MODEL_DEFAULTS, steps: int = DEFAULT_STEPS,
                           tolerance: float = DEFAULT_TOLERANCE, max_new_tokens: int = 20, maps: str = "full"
                           ) -> Attribution:
    """A language model's greedy continuation of `prompt` (or the forced `continuation`), each of its tokens
    attributed to the prompt's tokens and the continuation's earlier ones (as inseq does for decoder-only models).
    The record's source is the prompt, its prefix the continuation's inputs (all but its last token). `maps`: see
    `attribute_continuation_ids`."""
    methods = check_methods(methods)
    check_self_attention_methods(methods)
    if continuation is None:
        trace = model.trace(prompt, max_new_tokens, top_k=1)
        prompt_ids = trace.target_ids[:trace.settings["prompt_length"]]
        new = trace.target_ids[len(prompt_ids):]
    else:
        new = model.continuation_ids(continuation)
        prompt_ids = model.encode(prompt, len(new))
    return attribute_continuation_ids(model, prompt_ids, new, methods, steps, tolerance, maps)


def check_self_attention_methods(methods: Sequence[str], what: str = "a language model (decoder-only)") -> None:
    """One line where `methods` name one that reads cross-attention, which `what` has none of."""
    cross = [m for m in methods if m in CROSS_METHODS]
    if cross:
        raise ValueError(f"attribution method {cross[0]!r} reads cross-attention, which {what} has none of; "
                         f"choose from {', '.join(LANGUAGE_MODEL_DEFAULTS)}, integrated_gradients")


def attribute_continuation_ids(model: LanguageModel, prompt_ids: Sequence[int], new: Sequence[int],
                               methods: Sequence[str] = LANGUAGE_MODEL_DEFAULTS, steps: int = DEFAULT_STEPS,
                               tolerance: float = DEFAULT_TOLERANCE, maps: str = "full") -> Attribution:
    """`attribute_continuation` of the continuation ids `new` after `prompt_ids`. `maps` "on_demand" (a long prompt):
    the pass keeps no map; value-weighted attention keeps the continuation's rows alone, made from each layer's
    recipe, and ALTI+ (which splits every layer into n² vectors) refuses in one line."""
    methods = check_methods(methods)
    check_self_attention_methods(methods)
    if maps not in ("full", "on_demand"):
        raise ValueError(f"maps must be 'full' or 'on_demand', got {maps!r}")
    if maps == "on_demand" and "alti" in methods:
        raise ValueError("ALTI+ splits every layer's output into n² vectors: it runs with maps='full' only")
    prompt_ids, new = list(prompt_ids), list(new)
    if not new:
        raise ValueError("max_new_tokens is 0: there is no continuation to attribute")
    if not prompt_ids:
        raise ValueError("the prompt gives no tokens: type some text for the model to continue")
    ids = [*prompt_ids, *new[:-1]]
    first = len(prompt_ids) - 1
    with torch.inference_mode():
        out = model.forced_pass(ids, need_weights=True if maps == "full" else "recipe")
        log_probs = torch.log_softmax(out.logits[0, first:].float(), dim=-1)
        chosen = log_probs[torch.arange(len(new)), torch.tensor(new, device=log_probs.device)]
        vw: dict[str, list[np.ndarray]] = {}
        if "value_weighted" in methods:
            vw["decoder"] = (value_weighted_rows(model.network, out, first) if maps == "on_demand" else
                             [float64_array(value_weighted(model.network, r, "decoder", i)[0])
                              for i, r in enumerate(out.records)])
        alti, alti_layers, skipped = None, {}, {}
        sandwich = sandwich_norm_layer(model.network) if "alti" in methods else None
        if sandwich is not None:  # the other methods still run; the record says why ALTI+ did not
            skipped["alti"] = (f"ALTI+ does not decompose layer {sandwich}'s norm of the attention output (Gemma 2 / "
                               "3's sandwich norm, OLMo 2's): its parts would not add up to the output")
        elif "alti" in methods:
            rolled, blocks = self_alti(model.network, out)
            alti, alti_layers = float64_array(rolled[0, first:]), {"decoder": [float64_array(b[0]) for b in blocks]}
        del out
    gradient_methods = tuple(m for m in methods if m in GRADIENT_METHODS)
    grads = (language_model_gradients(model, prompt_ids, new, gradient_methods, steps, None, tolerance)
             if gradient_methods else GradientResult({}, 0, None, None))
    pieces = model.tokenizer.pieces
    return Attribution(
        source_tokens=pieces(prompt_ids), prefix_tokens=pieces(new[:-1]), output_tokens=pieces(new),
        source_ids=list(prompt_ids), output_ids=list(new), log_probs=float64_array(chosen), attentions=[],
        encoder_attentions=[], value_weighted=vw, alti=alti, alti_layers=alti_layers, gradients=grads.scores,
        steps=grads.steps, completeness_gap=grads.completeness_gap, score_change=grads.score_change,
        tolerance=grads.tolerance, model_name=model.name, skipped=skipped)


ATTRIBUTE: PerKind[Callable[..., Attribution]] = PerKind("attribute")  # (model, text, target, *, methods, steps,
# foil, beam, alpha, rule, tolerance): `attribute` of each kind of model


def attribute(model: ModelKind, text: str, target: str | None = None, methods: Sequence[str] = DEFAULT_METHODS,
              steps: int = DEFAULT_STEPS, foil: str | None = None, beam: int | None = None,
              alpha: float | None = None, rule: str | None = None, tolerance: float = DEFAULT_TOLERANCE
              ) -> Attribution:
    """Attributions of a `viz_model.TranslationModel`'s translation of `text` (searched by `rule` with `beam` and
    `alpha`, the model's own search by default; or of the forced `target`). Integrated gradients use at most
    `steps` points, adaptively until every output's completeness gap is within `tolerance` of its score change (the
    points used: ``result.steps``; the gaps: ``result.relative_gap``); ``tolerance=0``: `steps` fixed points.

    Input errors are those of `TranslationModel.trace` (empty, too long, ...). `foil`: one piece of the target
    vocabulary; the scores then explain ``log p(y_i) - log p(foil)`` (contrastive).

    A `LanguageModel`: `text` is the prompt, `target` a forced continuation (see `attribute_continuation`); the
    cross-attention methods, `foil` and the search settings do not apply, and its default methods are
    `LANGUAGE_MODEL_DEFAULTS`."""
    return ATTRIBUTE.of(model)(model, text, target, methods=methods, steps=steps, foil=foil, beam=beam, alpha=alpha,
                               rule=rule, tolerance=tolerance)


@ATTRIBUTE.register("language_model")
def attribute_prompt(model: LanguageModel, text: str, target: str | None = None, *,
                     methods: Sequence[str] = DEFAULT_METHODS, steps: int = DEFAULT_STEPS, foil: str | None = None,
                     beam: int | None = None, alpha: float | None = None, rule: str | None = None,
                     tolerance: float = DEFAULT_TOLERANCE) -> Attribution:
    """`attribute` of a language model: `attribute_continuation` (`DEFAULT_METHODS`: `LANGUAGE_MODEL_DEFAULTS`);
    `foil` and the search settings are a translator's."""
    if (foil, beam, alpha, rule) != (None, None, None, None):
        raise ValueError("attribute of a language model continues its prompt greedily: foil, beam, alpha and "
                         "rule do not apply")
    return attribute_continuation(model, text, target, LANGUAGE_MODEL_DEFAULTS if methods is DEFAULT_METHODS
                                  else methods, steps, tolerance)


@ATTRIBUTE.register("translator")
def attribute_translation(model: TranslationModel, text: str, target: str | None = None, *,
                          methods: Sequence[str] = DEFAULT_METHODS, steps: int = DEFAULT_STEPS,
                          foil: str | None = None, beam: int | None = None, alpha: float | None = None,
                          rule: str | None = None, tolerance: float = DEFAULT_TOLERANCE) -> Attribution:
    """`attribute` of a translator: its translation of `text` (or the forced `target`) scored by `methods`."""
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
