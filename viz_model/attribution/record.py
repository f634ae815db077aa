"""`Attribution`: every method's scores for one translation, read per method, saved to and loaded from ``.npz``."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..analysis.rollout import attention_rollout
from .gradients import GradientResult, completeness_note

FORMAT_VERSION = 1


class AttributionError(ValueError):
    """An attribution file that cannot be read; the message names the file."""


@dataclass
class Attribution:
    """Every method's scores for one translation (teacher-forced on its output); arrays are float64.

    :ivar source_tokens: the source pieces, ``</s>`` last
    :ivar prefix_tokens: the decoder's inputs ``<s> y_1 .. y_{n-1}`` (a language model's: ``y_1 .. y_{n-1}``, its
        source the prompt)
    :ivar output_tokens: ``y_1 .. y_n``, ``</s>`` last
    :ivar source_ids: the source piece ids
    :ivar output_ids: the output piece ids
    :ivar log_probs: ``(outputs,)`` log p(y_i | source, y_<i)
    :ivar attentions: cross-attention per layer, ``(heads, outputs, src_len)``
    :ivar encoder_attentions: encoder self-attention per layer, ``(heads, src_len, src_len)``, for the rollout
    :ivar value_weighted: kind -> per layer ``(heads, queries, keys)`` value-weighted attention (a language model's
        long prompt: the continuation's query rows alone; an encoder's: its mask tokens' rows alone)
    :ivar alti: ALTI+ ``(outputs, src_len + prefix_len)``: source columns, then prefix columns; None: not computed
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
    :ivar skipped: method -> the one line saying why it was asked for and not computed (ALTI+ on a sandwich norm)
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
    skipped: dict[str, str] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    @property
    def methods(self) -> list[str]:
        """The ranking methods this record can score sources with."""
        names = ["attention_mean", *(f"attention_layer{i + 1}" for i in range(len(self.attentions))), "rollout"
                 ] if self.attentions else []  # a language model's: no cross-attention
        if self.value_weighted:
            names.append("value_weighted")
        if self.alti is not None:
            names.append("alti")
        return names + list(self.gradients)

    def source_scores(self, method: str) -> np.ndarray:
        """``(outputs, src_len)``: how much each source token mattered to each output token, by `method`."""
        src = len(self.source_tokens)
        if (method.startswith("attention") or method == "rollout") and not self.attentions:
            raise ValueError(f"{method!r} reads cross-attention; a language model's attribution has none, nor an "
                             "encoder's")
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
        if method == "value_weighted" and "cross" in self.value_weighted:
            maps = np.mean([m.mean(axis=0) for m in self.value_weighted["cross"]], axis=0)
            return maps / np.maximum(maps.sum(axis=1, keepdims=True), 1e-12)
        if method == "value_weighted" and self.value_weighted:  # self-attention's (a language model's: output i is
            # read at row src-1+i; an encoder's record keeps its mask rows alone): the last rows
            (layers,) = self.value_weighted.values()
            maps = np.mean([m.mean(axis=0) for m in layers], axis=0)[-len(self.output_tokens):]
            return maps[:, :src] / np.maximum(maps.sum(axis=1, keepdims=True), 1e-12)
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
            raise ValueError(self.skipped.get("alti", "this attribution was computed without ALTI+ (methods must "
                                                      "include 'alti')"))
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
                  "foil": self.foil, "model_name": self.model_name, "skipped": self.skipped}
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
                tolerance=float(header.get("tolerance", 0.0)), foil=header["foil"], model_name=header["model_name"],
                skipped=dict(header.get("skipped", {})))
        except AttributionError:
            raise
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as err:
            raise AttributionError(f"{path}: not an attribution file ({type(err).__name__}: {err})") from None

