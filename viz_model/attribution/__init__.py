"""Beyond raw attention: what each source token and each target-prefix token contributed to every output token.

    import viz_model
    from viz_model.attribution import attribute
    result = attribute(viz_model.load(), "Two dogs play in the snow.")
    result.source_share()            # per output token: the share of the prediction that comes from the source
    result.source_scores("alti")     # (outputs, source tokens)

Methods (each gives, per output token, a score for every source token; the contribution and gradient methods score
the target prefix too):

- ``attention_mean`` and ``attention_layerN``: cross-attention weights (heads averaged; all layers, or layer N);
- ``rollout``: the last layer's cross-attention through the encoder's attention rollout (Abnar & Zuidema, 2020);
- ``value_weighted``: cross-attention weighted by the norm of the transformed value vectors (Kobayashi et al.,
  2020), heads and layers averaged;
- ``alti``: ALTI+ (Ferrando et al., 2022), see `contributions`;
- ``saliency``, ``input_x_gradient``, ``integrated_gradients``: see `gradients`.

`faithfulness.deletion_scores` checks which ranking the prediction really depends on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..analysis.rollout import attention_rollout
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
    completeness_note,
    gradient_attributions,
)

CONTRIBUTION_METHODS = ("value_weighted", "alti")
METHODS = ("attention", "rollout", *CONTRIBUTION_METHODS, *GRADIENT_METHODS)
"""What `attribute` can compute (its `methods`)."""
DEFAULT_METHODS = ("attention", "rollout", "value_weighted", "alti", "saliency", "input_x_gradient")
"""What `attribute` computes unless told: every method but integrated gradients."""
FORMAT_VERSION = 1


class AttributionError(ValueError):
    """An attribution file that cannot be read; the message names the file."""


@dataclass
class Attribution:
    """Every method's scores for one translation (teacher-forced on its output); arrays are float64.

    :ivar source_tokens: the source pieces, ``</s>`` last
    :ivar prefix_tokens: the decoder's inputs ``<s> y_1 .. y_{n-1}``
    :ivar output_tokens: ``y_1 .. y_n``, ``</s>`` last
    :ivar source_ids: the source piece ids
    :ivar output_ids: the output piece ids
    :ivar log_probs: ``(outputs,)`` log p(y_i | source, y_<i)
    :ivar attentions: cross-attention per layer, ``(heads, outputs, src_len)``
    :ivar encoder_attentions: encoder self-attention per layer, ``(heads, src_len, src_len)``, for the rollout
    :ivar value_weighted: kind -> per layer ``(heads, queries, keys)`` value-weighted attention
    :ivar alti: ALTI+ ``(outputs, src_len + outputs)``: source columns, then prefix columns; None: not computed
    :ivar encoder_alti: ``(src_len, src_len)`` the ALTI rollout of the encoder
    :ivar alti_layers: ALTI of each sub-layer alone, kind -> per layer ``(queries, keys)``; cross-attention's
        have one more column, the residual
    :ivar gradients: method -> ``(outputs, src_len + outputs)`` gradient scores
    :ivar steps: the points of the path integrated gradients used (0: not computed)
    :ivar completeness_gap: integrated gradients, per output: ``|sum of the scores - score_change|``
    :ivar score_change: integrated gradients, per output: ``score(input) - score(baseline)``
    :ivar tolerance: the relative gap adaptive integrated gradients aimed for (0: fixed Gauss-Legendre points)
    :ivar foil: contrastive: the piece the scores explain "and not"; None: not contrastive
    :ivar model_name: the model directory's name
    :ivar version: the file format's version
    """

    source_tokens: list[str]
    prefix_tokens: list[str]
    output_tokens: list[str]
    source_ids: list[int]
    output_ids: list[int]
    log_probs: np.ndarray
    attentions: list[np.ndarray]
    encoder_attentions: list[np.ndarray]
    value_weighted: dict[str, list[np.ndarray]] = field(default_factory=dict)
    alti: np.ndarray | None = None
    encoder_alti: np.ndarray | None = None
    alti_layers: dict[str, list[np.ndarray]] = field(default_factory=dict)
    gradients: dict[str, np.ndarray] = field(default_factory=dict)
    steps: int = 0
    completeness_gap: np.ndarray | None = None
    score_change: np.ndarray | None = None
    tolerance: float = 0.0
    foil: str | None = None
    model_name: str = ""
    version: int = FORMAT_VERSION

    @property
    def methods(self) -> list[str]:
        """The ranking methods this record can score sources with."""
        names = ["attention_mean", *(f"attention_layer{i + 1}" for i in range(len(self.attentions))), "rollout"]
        if self.value_weighted:
            names.append("value_weighted")
        if self.alti is not None:
            names.append("alti")
        return names + list(self.gradients)

    def source_scores(self, method: str) -> np.ndarray:
        """``(outputs, src_len)``: how much each source token mattered to each output token, by `method`."""
        src = len(self.source_tokens)
        if method == "attention_mean":
            return np.mean([a.mean(axis=0) for a in self.attentions], axis=0)
        if method.startswith("attention_layer"):
            layer = method.removeprefix("attention_layer")
            if not layer.isdigit() or not 1 <= int(layer) <= len(self.attentions):
                raise ValueError(f"{method!r}: the model has cross-attention layers 1 to {len(self.attentions)}")
            return self.attentions[int(layer) - 1].mean(axis=0)
        if method == "rollout":
            encoder = attention_rollout(self.encoder_attentions)[-1]
            return self.attentions[-1].mean(axis=0) @ encoder
        if method == "value_weighted" and self.value_weighted:
            maps = np.mean([m.mean(axis=0) for m in self.value_weighted["cross"]], axis=0)
            return maps / np.maximum(maps.sum(axis=1, keepdims=True), 1e-12)
        if method == "alti" and self.alti is not None:
            return self.alti[:, :src]
        if method in self.gradients:
            return self.gradients[method][:, :src]
        raise ValueError(f"no scores for {method!r} in this attribution; it has {', '.join(self.methods)}")

    def prefix_scores(self, method: str) -> np.ndarray:
        """``(outputs, outputs)``: each target-prefix token's score for each output (ALTI+ and gradients only)."""
        src = len(self.source_tokens)
        if method == "alti" and self.alti is not None:
            return self.alti[:, src:]
        if method in self.gradients:
            return self.gradients[method][:, src:]
        raise ValueError(f"{method!r} scores no prefix tokens; alti and the gradient methods do")

    @property
    def relative_gap(self) -> np.ndarray | None:
        """Integrated gradients' completeness gap per output, relative to its score change (0.01 = 1%)."""
        return GradientResult({}, self.steps, self.completeness_gap, self.score_change).relative_gap

    def completeness_note(self) -> tuple[str, bool]:
        """Integrated gradients' points and largest gap in words, and whether every gap met the target."""
        if self.relative_gap is None:
            raise ValueError("this attribution was computed without integrated gradients")
        return completeness_note(self.steps, self.tolerance, self.relative_gap)

    def source_share(self) -> np.ndarray:
        """ALTI+: per output token the share of its prediction that comes from the source (the rest: the prefix)."""
        if self.alti is None:
            raise ValueError("this attribution was computed without ALTI+ (methods must include 'alti')")
        return self.alti[:, :len(self.source_tokens)].sum(axis=1)

    # --- files -------------------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """An ``.npz`` holding every array and a JSON header; `load` gives back an equal record."""
        path = Path(path)
        if path.suffix != ".npz":
            raise ValueError(f"an attribution is saved as .npz, got {path.name!r}")
        path.write_bytes(self.to_npz())
        return path

    def to_npz(self) -> bytes:
        """The bytes `save` writes (for a download)."""
        arrays: dict[str, np.ndarray] = {"log_probs": self.log_probs}
        arrays |= {f"attention_{i}": a for i, a in enumerate(self.attentions)}
        arrays |= {f"encoder_attention_{i}": a for i, a in enumerate(self.encoder_attentions)}
        arrays |= {f"vw_{kind}_{i}": a for kind, maps in self.value_weighted.items() for i, a in enumerate(maps)}
        arrays |= {f"gradient_{m}": a for m, a in self.gradients.items()}
        arrays |= {f"alti_{kind}_{i}": a for kind, maps in self.alti_layers.items() for i, a in enumerate(maps)}
        for name in ("alti", "encoder_alti", "completeness_gap", "score_change"):
            if getattr(self, name) is not None:
                arrays[name] = getattr(self, name)
        header = {"version": self.version, "source_tokens": self.source_tokens, "prefix_tokens": self.prefix_tokens,
                  "output_tokens": self.output_tokens, "source_ids": self.source_ids, "output_ids": self.output_ids,
                  "layers": len(self.attentions), "encoder_layers": len(self.encoder_attentions),
                  "value_weighted": {k: len(v) for k, v in self.value_weighted.items()},
                  "alti_layers": {k: len(v) for k, v in self.alti_layers.items()},
                  "gradients": list(self.gradients), "steps": self.steps, "tolerance": self.tolerance,
                  "foil": self.foil, "model_name": self.model_name}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, header=np.array(json.dumps(header)), **arrays)
        return buffer.getvalue()

    @classmethod
    def load(cls, path: str | Path) -> Attribution:
        """Read an ``.npz`` that `save` wrote; anything else raises `AttributionError` naming the file."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            header = json.loads(str(arrays.pop("header")))
            if header.get("version") != FORMAT_VERSION:
                raise AttributionError(f"{path}: version {header.get('version')!r} (expected {FORMAT_VERSION})")
            return cls(
                source_tokens=header["source_tokens"], prefix_tokens=header["prefix_tokens"],
                output_tokens=header["output_tokens"], source_ids=header["source_ids"],
                output_ids=header["output_ids"], log_probs=arrays["log_probs"],
                attentions=[arrays[f"attention_{i}"] for i in range(header["layers"])],
                encoder_attentions=[arrays[f"encoder_attention_{i}"] for i in range(header["encoder_layers"])],
                value_weighted={k: [arrays[f"vw_{k}_{i}"] for i in range(n)]
                                for k, n in header["value_weighted"].items()},
                alti=arrays.get("alti"), encoder_alti=arrays.get("encoder_alti"),
                alti_layers={k: [arrays[f"alti_{k}_{i}"] for i in range(n)] for k, n in header["alti_layers"].items()},
                gradients={m: arrays[f"gradient_{m}"] for m in header["gradients"]}, steps=header["steps"],
                completeness_gap=arrays.get("completeness_gap"), score_change=arrays.get("score_change"),
                tolerance=float(header.get("tolerance", 0.0)), foil=header["foil"], model_name=header["model_name"])
        except AttributionError:
            raise
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as err:
            raise AttributionError(f"{path}: not an attribution file ({type(err).__name__}: {err})") from None


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
        vw = ({kind: [_np(value_weighted(network, r, kind, i)[0]) for i, r in enumerate(out.records(kind))]
               for kind in ATTENTION_KINDS} if "value_weighted" in methods else {})
        alti = encoder_alti = None
        alti_layers: dict[str, list[np.ndarray]] = {}
        if "alti" in methods:
            blocks = alti_blocks(network, out)
            alti = _np(alti_plus(network, out, blocks)[0])
            encoder_alti = _np(rollout(blocks["encoder"])[0])
            alti_layers = {kind: [_np(block[0]) for block in layers] for kind, layers in blocks.items()}
    gradient_methods = tuple(m for m in methods if m in GRADIENT_METHODS)
    grads = (gradient_attributions(network, source_ids, output_ids, gradient_methods, steps, foil, tolerance)
             if gradient_methods else GradientResult({}, 0, None, None))
    name = pieces or (lambda ids: [str(i) for i in ids])
    return Attribution(
        source_tokens=list(name(source_ids)), prefix_tokens=list(name(prefix)), output_tokens=list(name(output_ids)),
        source_ids=list(source_ids), output_ids=list(output_ids), log_probs=_np(chosen),
        attentions=[_np(a[0]) for a in out.cross_attentions],
        encoder_attentions=[_np(a[0]) for a in out.encoder_attentions], value_weighted=vw, alti=alti,
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


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().cpu().numpy()
