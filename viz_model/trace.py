"""`AttentionTrace`: everything one translation computed, aligned with its token lists.

Axes: source positions are ``source_tokens`` (pieces + ``</s>``); target positions are ``target_tokens``,
the decoder's inputs (``<s> y1 .. y_{n-1}``); row t of a decoder or cross map is the query that predicted
``output_tokens[t]``. Attention maps are per layer ``(heads, query_len, key_len)``, never averaged.
Saved losslessly as ``.npz`` (arrays + a JSON header) or ``.json`` (float32 values written exactly). A long
prompt's trace holds `OnDemandMaps` in place of lists of maps: each layer's map is made when read (`head_map` makes
one head's alone), and a saved trace holds the recipes those maps are made from, with a digest of them.
"""

from __future__ import annotations

import dataclasses
import html
import io
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .layer_maps import LayerMaps, layer_maps
from .nn.arrays import to_numpy
from .nn.attention import causal_mask
from .nn.kinds import check_kind
from .nn.model import Seq2SeqOutput, Transformer
from .nn.score_recipe import ScoreRecipe
from .on_demand import OnDemandMaps, reading, recipe_arrays, recipe_from_arrays, recipes_digest, translator_recipes
from .tokenization.tokenizer import Tokenizer, word_ids

FORMAT_VERSION = 1
ARRAY_LIST_FIELDS = ("encoder_attentions", "decoder_attentions", "cross_attentions")
ARRAY_FIELDS = ("encoder_mask", "decoder_mask", "cross_mask", "source_positional", "target_positional",
                "source_embeddings", "target_embeddings")


class TraceError(ValueError):
    """A trace file is missing, malformed or inconsistent."""


@dataclass
class DecodingStep:
    """Step t: the decoder read ``input_token`` and chose ``token`` among the top-k candidates.

    :ivar position: t, counted from 0
    :ivar input_id: the id the decoder read at this step (``<s>`` first)
    :ivar input_token: its piece
    :ivar token_id: the id output at this step
    :ivar token: its piece
    :ivar probability: the output token's probability under the full-precision network
    :ivar top_ids: the ids of the k most probable next tokens, most probable first
    :ivar top_tokens: their pieces
    :ivar top_probabilities: their probabilities
    """

    position: int
    input_id: int
    input_token: str
    token_id: int
    token: str
    probability: float
    top_ids: list[int]
    top_tokens: list[str]
    top_probabilities: list[float]


@dataclass(repr=False)
class AttentionTrace:
    """Everything one translation computed: tokens, every head's attention map, masks, encodings and steps.

    :ivar source_text: the sentence as given
    :ivar translation: the output, decoded to text
    :ivar source_ids: the source piece ids, ending in ``</s>``
    :ivar source_tokens: the source pieces (``▁`` starts a word): the keys and queries of encoder maps
    :ivar source_words: per source token, the index of the word it belongs to
    :ivar target_ids: the decoder's input ids, ``<s> y1 .. y_{n-1}``
    :ivar target_tokens: the decoder's input pieces: the queries of decoder and cross maps
    :ivar target_words: per target token, the index of its word
    :ivar output_ids: the output ids ``y1 .. y_n``, ending in ``</s>``: row t of a decoder or cross map is the query
        that predicted ``output_ids[t]``
    :ivar output_tokens: the output pieces
    :ivar encoder_attentions: per layer, ``(heads, src_len, src_len)`` encoder self-attention weights (a list, or
        `OnDemandMaps` that make a layer's when it is read; the same for the decoder and cross lists)
    :ivar decoder_attentions: per layer, ``(heads, tgt_len, tgt_len)`` masked decoder self-attention weights
    :ivar cross_attentions: per layer, ``(heads, tgt_len, src_len)`` encoder-decoder attention weights
    :ivar encoder_mask: ``(src_len, src_len)`` bool, True = may attend
    :ivar decoder_mask: ``(tgt_len, tgt_len)`` bool, the causal mask (a sliding-window layer's own: `mask`)
    :ivar cross_mask: ``(tgt_len, src_len)`` bool
    :ivar source_positional: ``(src_len, d_model)`` what is added to the source embeddings: sinusoids (the paper,
        Marian, M2M100 / NLLB), a learned table's rows (BART, mBART: from row 2), zeros where position enters the
        scores instead (T5's relative bias, RoPE, ALiBi) or the trace was made without positions
    :ivar target_positional: ``(tgt_len, d_model)`` the same for the decoder's inputs
    :ivar source_embeddings: ``(src_len, d_model)`` the token embeddings before the positions are added: times
        sqrt(d_model) where the config's ``scale_embeddings`` is on (the paper, Marian, M2M100 / NLLB, mBART), not
        scaled where it is off (T5, BART); BART and mBART norm the sum (``embedding_norm``) after it
    :ivar target_embeddings: ``(tgt_len, d_model)`` the same for the decoder's inputs
    :ivar steps: one `DecodingStep` per output token, with its top-k candidates
    :ivar log_probability: the output's log-probability, summed over its tokens
    :ivar settings: how it was searched: beam, alpha, top_k, forced, max_output_length, search (int8, fp32 or
        forced), rule, head_mask, positions; a language model's: windows (per decoder layer, its sliding window or
        None), kv_heads, prompt_length; where the model has them, sink_logits (`sink_logits`) and routing
        (`expert_routing`)
    :ivar config: the model's `ModelConfig` as a dict
    :ivar model_name: the model directory's name
    :ivar device: where it ran: "CPU" or the GPU's name
    :ivar timings: milliseconds of the search (``decode_ms``), the trace (``trace_ms``) and both (``total_ms``)
    :ivar version: the file format's version
    """

    source_text: str
    translation: str
    source_ids: list[int]
    source_tokens: list[str]
    source_words: list[int]
    target_ids: list[int]
    target_tokens: list[str]
    target_words: list[int]
    output_ids: list[int]
    output_tokens: list[str]
    encoder_attentions: list[np.ndarray] | OnDemandMaps
    decoder_attentions: list[np.ndarray] | OnDemandMaps
    cross_attentions: list[np.ndarray] | OnDemandMaps
    encoder_mask: np.ndarray
    decoder_mask: np.ndarray
    cross_mask: np.ndarray
    source_positional: np.ndarray
    target_positional: np.ndarray
    source_embeddings: np.ndarray
    target_embeddings: np.ndarray
    steps: list[DecodingStep]
    log_probability: float
    settings: dict[str, Any]
    config: dict[str, Any]
    model_name: str = ""
    device: str = "cpu"
    timings: dict[str, float] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        for name in ARRAY_LIST_FIELDS:  # whole maps read as maps made on demand are: one interface, `LayerMaps`
            setattr(self, name, layer_maps(getattr(self, name)))

    # --- convenience -----------------------------------------------------------------------------
    @property
    def num_layers(self) -> dict[str, int]:
        """Layers per kind: ``{"encoder": ..., "decoder": ..., "cross": ...}``."""
        return {"encoder": len(self.encoder_attentions), "decoder": len(self.decoder_attentions),
                "cross": len(self.cross_attentions)}

    @property
    def num_heads(self) -> int:
        """Heads per layer (a language model's: its query heads; 0 for a trace without maps)."""
        maps = self.encoder_attentions or self.decoder_attentions
        return self.map_shape("encoder" if self.encoder_attentions else "decoder", 0)[0] if maps else 0

    def attentions(self, kind: str) -> LayerMaps:
        """The maps of one kind: "encoder", "decoder" or "cross" (`OnDemandMaps`: each layer's made when read; else
        `WholeMaps`)."""
        check_kind(kind)
        return getattr(self, f"{kind}_attentions")

    def map_shape(self, kind: str, layer: int) -> tuple[int, int, int]:
        """``(heads, queries, keys)`` of one layer's maps, without making them."""
        return self.attentions(kind).shape(layer)

    def head_map(self, kind: str, layer: int, head: int, rows: slice | None = None) -> np.ndarray:
        """``(queries, keys)`` float32: one head's map (`rows`: those query rows alone), made alone where the maps
        are made on demand."""
        maps = self.attentions(kind)
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(maps):
            raise ValueError(f"layer must be an integer from 0 to {len(maps) - 1} ({kind}), got {layer!r}")
        heads, _, _ = self.map_shape(kind, layer)
        if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < heads:
            raise ValueError(f"head must be an integer from 0 to {heads - 1}, got {head!r}")
        return maps.head(layer, head, rows)

    def reading(self, kind: str) -> str:
        """How a kind's maps are read (`on_demand.reading`): "whole" (drawn cell by cell) or "rows" (a head's rows at a
        time: blocks, windows and summaries); decided here, from their size, for every page."""
        _, n, m = self.map_shape(kind, 0)
        return reading(n, m)

    def with_whole_maps(self) -> AttentionTrace:
        """The trace a download writes: its maps themselves where it keeps recipes of maps read whole (every short
        language-model trace), else the recipes (a long one's: `load` makes the maps)."""
        made = {f"{kind}_attentions": list(self.attentions(kind)) for kind in self.recipes()
                if self.reading(kind) == "whole"}
        return dataclasses.replace(self, **made) if made else self

    def recipes(self) -> dict[str, list[ScoreRecipe]]:
        """Per kind whose maps are made on demand, its layers' recipes."""
        return {kind: self.attentions(kind).recipes for kind in ("encoder", "decoder", "cross")
                if isinstance(self.attentions(kind), OnDemandMaps)}

    def axes(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of a kind's maps."""
        if kind == "encoder":
            return self.source_tokens, self.source_tokens
        if kind == "decoder":
            return self.target_tokens, self.target_tokens
        return self.target_tokens, self.source_tokens

    def _arrays(self) -> Iterator[np.ndarray]:
        """Every array the trace holds (fields that are arrays or lists of them)."""
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            for array in value if isinstance(value, list) else [value]:
                if isinstance(array, np.ndarray):
                    yield array

    @property
    def nbytes(self) -> int:
        """Bytes held by the trace's arrays (what a cache of traces must bound)."""
        return sum(int(array.nbytes) for array in self._arrays()) + sum(
            maps.nbytes for maps in (self.encoder_attentions, self.decoder_attentions, self.cross_attentions)
            if isinstance(maps, OnDemandMaps))

    def freeze(self) -> AttentionTrace:
        """The same trace with every array read-only (a trace shared between sessions must not be written)."""
        for array in self._arrays():
            array.flags.writeable = False
        return self

    def summary(self) -> dict[str, Any]:
        """What the trace holds, in a few fields (what `repr` and Jupyter show instead of every array)."""
        layers = self.num_layers
        return {"model": self.model_name or "?", "source": self.source_text, "translation": self.translation,
                "source tokens": len(self.source_tokens), "decoder inputs": len(self.target_tokens),
                "layers": f"{layers['encoder']} encoder + {layers['decoder']} decoder", "heads": self.num_heads,
                "search": self.settings.get("search", "?"), "beam": self.settings.get("beam", "?"),
                "log-probability": round(self.log_probability, 4)}

    def __repr__(self) -> str:
        return "AttentionTrace(" + ", ".join(f"{k}={v!r}" for k, v in self.summary().items()) + ")"

    def _repr_html_(self) -> str:
        """Jupyter's view: the summary as a small table (text escaped) and how to draw the maps."""
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                       f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
                       for k, v in self.summary().items())
        return (f"<table><caption>AttentionTrace</caption>{rows}</table><p>Draw it with "
                "<code>viz_model.plot.heatmap(trace, \"cross\", layer=0)</code>.</p>")

    def step_note(self, t: int) -> str | None:
        """Why step `t` chose a token other than the top candidate of this (full-precision) pass, or None.

        The steps are re-scored by the full-precision network, while the output came from the search (int8 weights
        on the CPU, several hypotheses with a beam) or was forced, so the two may rank a step differently."""
        step = self.steps[t]
        if not step.top_ids or step.token_id == step.top_ids[0]:
            return None
        top = f"{step.top_tokens[0]} (p = {step.top_probabilities[0]:.3f})"
        chosen = f"{step.token} (p = {step.probability:.3f})"
        search, beam = self.settings.get("search"), int(self.settings.get("beam", 1))
        if search == "forced" or self.settings.get("forced"):
            return f"the output was forced: it reads {chosen}, where the model itself ranks {top} first"
        if beam > 1:
            return (f"beam search keeps the best whole translation, not the best next token: it kept {chosen} "
                    f"although {top} ranks first at this step")
        if search == "int8":
            return (f"the greedy search ran with int8 weights, where {step.token} scored highest; this "
                    f"full-precision pass ranks {top} first and {chosen} lower. Search in fp32 (sidebar) to see "
                    "the full-precision choice")
        return f"the search chose {chosen}, where this pass ranks {top} first (rounding in the search's cache)"

    def mask(self, kind: str, layer: int | None = None) -> np.ndarray:
        """The mask of one kind's maps, True = may attend; with `layer`, that layer's own: a language model's
        sliding-window layer (``settings["windows"]``, a window or None per decoder layer) sees its last keys only."""
        mask = {"encoder": self.encoder_mask, "decoder": self.decoder_mask, "cross": self.cross_mask}[kind]
        windows = self.settings.get("windows") or []
        window = windows[layer] if kind == "decoder" and layer is not None and windows else None
        return mask if window is None else mask & ~np.tri(*mask.shape, -window, dtype=bool)

    def sink_logits(self) -> np.ndarray | None:
        """``(layers, heads)`` float32 each decoder head's learned sink logit (``settings["sink_logits"]``: gpt-oss,
        whose maps' rows sum to one minus the sink's share); None for a model without learned sinks."""
        logits = self.settings.get("sink_logits")
        return None if not logits else np.asarray(logits, dtype=np.float32)

    def expert_routing(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Where a mixture of experts sent each target token (``settings["routing"]``): ``(layers, tokens, top_k)``
        int64 the chosen experts, best first, and float32 their router weights; None for a model without experts."""
        routing = self.settings.get("routing")
        if not routing:
            return None
        return np.asarray(routing["experts"], dtype=np.int64), np.asarray(routing["weights"], dtype=np.float32)

    def validate(self) -> None:
        """Check that every map's axes match the token lists; raise `TraceError` naming the mismatch."""
        s, t = len(self.source_tokens), len(self.target_tokens)
        if len(self.source_ids) != s or len(self.target_ids) != t or len(self.output_ids) != t:
            raise TraceError(f"token lists disagree: {s} source tokens / {len(self.source_ids)} ids, "
                             f"{t} target tokens / {len(self.target_ids)} ids / {len(self.output_ids)} outputs")
        for kind, (q, k) in (("encoder", (s, s)), ("decoder", (t, t)), ("cross", (t, s))):
            for i in range(len(self.attentions(kind))):
                shape = self.map_shape(kind, i)
                if len(shape) != 3 or shape[1:] != (q, k):
                    raise TraceError(f"{kind}_attentions[{i}] has shape {shape}, expected (heads, {q}, {k})")
            if self.mask(kind).shape != (q, k):
                raise TraceError(f"{kind}_mask has shape {self.mask(kind).shape}, expected ({q}, {k})")
        if len(self.steps) != t:
            raise TraceError(f"{len(self.steps)} decoding steps for {t} target positions")

    # --- serialisation -----------------------------------------------------------------------------
    def _header(self) -> dict[str, Any]:
        header = {}
        for f in dataclasses.fields(self):
            if f.name in ARRAY_LIST_FIELDS or f.name in ARRAY_FIELDS:
                continue
            value = getattr(self, f.name)
            header[f.name] = [dataclasses.asdict(s) for s in value] if f.name == "steps" else value
        recipes = self.recipes()
        if recipes:
            header["recipes"] = {kind: [r.settings() for r in layers] for kind, layers in recipes.items()}
            header["recipes_digest"] = recipes_digest(recipes)
        return header

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (arrays as nested lists, float32 values kept exactly)."""
        data = self._header()
        for name in ARRAY_LIST_FIELDS:
            maps = getattr(self, name)
            data[name] = ([{k: a.tolist() for k, a in recipe_arrays(r).items()} for r in maps.recipes]
                          if isinstance(maps, OnDemandMaps) else [a.tolist() for a in maps])
        for name in ARRAY_FIELDS:
            data[name] = getattr(self, name).tolist()
        return data

    def to_json(self) -> str:
        """`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttentionTrace:
        """The trace `to_dict` wrote, validated; anything else raises `TraceError`."""
        try:
            if not isinstance(data, dict):
                raise TraceError(f"not a valid trace: expected a JSON object, got {type(data).__name__}")
            if data.get("version") != FORMAT_VERSION:
                raise TraceError(f"trace format version {data.get('version')!r}, expected {FORMAT_VERSION}")
            values = dict(data)
            values["steps"] = [DecodingStep(**s) for s in data["steps"]]
            on_demand = _on_demand_maps(values, lambda name, i: data[name][i])
            for name in ARRAY_LIST_FIELDS:
                values[name] = (on_demand[name] if name in on_demand
                                else [np.asarray(a, dtype=np.float32) for a in data[name]])
            for name in ARRAY_FIELDS:
                dtype = bool if name.endswith("mask") else np.float32
                values[name] = np.asarray(data[name], dtype=dtype)
                if values[name].shape == (0,):  # an empty side (a language model's source, an encoder's target)
                    values[name] = values[name].reshape(_empty_shape(name, data))
            trace = cls(**values)
            trace.validate()
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, TraceError):
                raise
            raise TraceError(f"not a valid trace: {err}") from None
        return trace

    @classmethod
    def from_json(cls, text: str) -> AttentionTrace:
        """The trace `to_json` wrote, validated; anything else raises `TraceError`."""
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as err:
            raise TraceError(f"not valid JSON: {err}") from None

    def to_npz_bytes(self) -> bytes:
        """The trace as a compressed ``.npz`` (arrays as they are, the rest as a JSON header)."""
        arrays: dict[str, np.ndarray] = {"header": np.frombuffer(json.dumps(self._header()).encode(), np.uint8)}
        for name in ARRAY_LIST_FIELDS:
            maps = getattr(self, name)
            if isinstance(maps, OnDemandMaps):
                arrays |= {f"{name}/{i}/{k}": a for i, r in enumerate(maps.recipes)
                           for k, a in recipe_arrays(r).items()}
                continue
            for i, a in enumerate(maps):
                arrays[f"{name}/{i}"] = a
        for name in ARRAY_FIELDS:
            arrays[name] = getattr(self, name)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_npz_bytes(cls, data: bytes) -> AttentionTrace:
        """The trace `to_npz_bytes` wrote, validated; anything else raises `TraceError`."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                values = json.loads(npz["header"].tobytes().decode())
                if values.get("version") != FORMAT_VERSION:
                    raise TraceError(f"trace format version {values.get('version')!r}, expected {FORMAT_VERSION}")
                values["steps"] = [DecodingStep(**s) for s in values["steps"]]
                on_demand = _on_demand_maps(values, lambda name, i: {
                    key.rpartition("/")[2]: npz[key] for key in npz.files if key.startswith(f"{name}/{i}/")})
                for name in ARRAY_LIST_FIELDS:
                    count = sum(1 for key in npz.files if key.startswith(f"{name}/"))
                    values[name] = on_demand[name] if name in on_demand else [npz[f"{name}/{i}"] for i in range(count)]
                for name in ARRAY_FIELDS:
                    values[name] = npz[name]
            trace = cls(**values)
            trace.validate()
        except TraceError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OSError, EOFError, zipfile.BadZipFile) as err:
            raise TraceError(f"not a valid trace .npz: {err}") from None
        return trace

    def save(self, path: str | Path) -> Path:
        """Write ``.json`` or ``.npz`` (chosen by the suffix)."""
        path = Path(path)
        if path.suffix == ".json":
            path.write_text(self.to_json(), encoding="utf-8")
        elif path.suffix == ".npz":
            path.write_bytes(self.to_npz_bytes())
        else:
            raise TraceError(f"{path}: unknown trace format {path.suffix!r}; use .json or .npz")
        return path

    @classmethod
    def load(cls, path: str | Path) -> AttentionTrace:
        """Read a ``.json`` or ``.npz`` trace that `save` wrote; a missing or malformed file raises `TraceError`."""
        path = Path(path)
        if not path.is_file():
            raise TraceError(f"{path}: trace file not found")
        if path.suffix == ".json":
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as err:
                raise TraceError(f"{path}: not a UTF-8 JSON trace ({err})") from None
            return cls.from_json(text)
        if path.suffix == ".npz":
            return cls.from_npz_bytes(path.read_bytes())
        raise TraceError(f"{path}: unknown trace format {path.suffix!r}; use .json or .npz")

    @classmethod
    def decoder_only(cls, *, text: str, continuation: str, ids: list[int], tokens: list[str], output_ids: list[int],
                     output_tokens: list[str], maps: list[np.ndarray] | OnDemandMaps, mask: np.ndarray,
                     positional: np.ndarray, embeddings: np.ndarray, steps: list[DecodingStep],
                     log_probability: float, settings: dict[str, Any], config: dict[str, Any], model_name: str,
                     device: str, timings: dict[str, float]) -> AttentionTrace:
        """A decoder-only model's trace: `text` and its `continuation`; the tokens read (`ids`, `tokens`) with each
        layer's `maps`, their `mask`, `positional` encodings and token `embeddings`; what each step
        predicted (`output_ids`, `steps`). It has no source side: those fields are empty."""
        n, width = len(ids), config["d_model"]  # the empty side's encodings: (0, d_model)
        return cls(
            source_text=text, translation=continuation, source_ids=[], source_tokens=[], source_words=[],
            target_ids=ids, target_tokens=tokens, target_words=word_ids(tokens), output_ids=output_ids,
            output_tokens=output_tokens, encoder_attentions=[], decoder_attentions=maps, cross_attentions=[],
            encoder_mask=np.zeros((0, 0), dtype=bool), decoder_mask=mask, cross_mask=np.zeros((n, 0), dtype=bool),
            source_positional=np.zeros((0, width), dtype=np.float32), target_positional=positional,
            source_embeddings=np.zeros((0, width), dtype=np.float32), target_embeddings=embeddings, steps=steps,
            log_probability=log_probability, settings=settings, config=config, model_name=model_name, device=device,
            timings=timings)

    @classmethod
    def encoder_only(cls, *, text: str, filled: str, ids: list[int], tokens: list[str], words: list[int],
                     maps: list[np.ndarray] | OnDemandMaps, positional: np.ndarray, embeddings: np.ndarray,
                     log_probability: float, settings: dict[str, Any], config: dict[str, Any], model_name: str,
                     device: str, timings: dict[str, float]) -> AttentionTrace:
        """An encoder-only model's trace: `text` and the text with its mask tokens `filled`; the tokens read (`ids`,
        `tokens`, `words`) with each layer's `maps` (every key visible), `positional` encodings and token
        `embeddings`. It has no target side: those fields are empty."""
        n, width = len(ids), config["d_model"]  # the empty side's encodings: (0, d_model)
        return cls(
            source_text=text, translation=filled, source_ids=ids, source_tokens=tokens, source_words=words,
            target_ids=[], target_tokens=[], target_words=[], output_ids=[], output_tokens=[],
            encoder_attentions=maps, decoder_attentions=[], cross_attentions=[],
            encoder_mask=np.ones((n, n), dtype=bool), decoder_mask=np.zeros((0, 0), dtype=bool),
            cross_mask=np.zeros((0, n), dtype=bool), source_positional=positional,
            target_positional=np.zeros((0, width), dtype=np.float32), source_embeddings=embeddings,
            target_embeddings=np.zeros((0, width), dtype=np.float32), steps=[], log_probability=log_probability,
            settings=settings, config=config, model_name=model_name, device=device, timings=timings)

    @classmethod
    def recorded(cls, network: Transformer, tokenizer: Tokenizer, text: str, source: torch.Tensor,
                 prefix: torch.Tensor, output_ids: list[int], out: Seq2SeqOutput, top_k: int, positions: bool,
                 settings: dict[str, Any], model_name: str, device: str) -> AttentionTrace:
        """The trace of one translation of `text`: `out` is `network`'s recorded pass over the `source` ids and the
        decoder's inputs `prefix` (``<s>`` and the output but its last; each a batch of one) teacher-forced on
        `output_ids`; ``positions=False`` leaves its positional encodings zeros. A pass run with
        ``need_weights="recipe"`` gives `OnDemandMaps`."""
        src_ids, target_ids = source[0].tolist(), prefix[0].tolist()
        log_probs = torch.log_softmax(out.logits[0].float(), dim=-1)
        steps, total = decoding_steps(tokenizer, log_probs, target_ids, output_ids, top_k)
        source_pe = to_numpy(network.positional_encodings(len(src_ids), "source"))
        target_pe = to_numpy(network.positional_encodings(len(target_ids), "target"))
        if not positions:
            source_pe, target_pe = np.zeros_like(source_pe), np.zeros_like(target_pe)
        source_mask = to_numpy(out.source_mask[0, 0])
        on_demand = bool(out.encoder_records) and isinstance(out.encoder_records[0], ScoreRecipe)
        maps = {kind: OnDemandMaps(recipes) for kind, recipes in
                translator_recipes(network, source, prefix, out, positions).items()} if on_demand else {}
        return cls(
            source_text=text, translation=tokenizer.decode(output_ids),
            source_ids=src_ids, source_tokens=tokenizer.pieces(src_ids),
            source_words=word_ids(tokenizer.pieces(src_ids)),
            target_ids=target_ids, target_tokens=tokenizer.pieces(target_ids),
            target_words=word_ids(tokenizer.pieces(target_ids)),
            output_ids=output_ids, output_tokens=tokenizer.pieces(output_ids),
            encoder_attentions=maps.get("encoder") or [to_numpy(a[0]) for a in out.encoder_attentions],
            decoder_attentions=maps.get("decoder") or [to_numpy(a[0]) for a in out.decoder_attentions],
            cross_attentions=maps.get("cross") or [to_numpy(a[0]) for a in out.cross_attentions],
            encoder_mask=np.broadcast_to(source_mask, (len(src_ids), len(src_ids))).copy(),
            decoder_mask=to_numpy(causal_mask(len(target_ids))[0, 0]),
            cross_mask=np.broadcast_to(source_mask, (len(target_ids), len(src_ids))).copy(),
            source_positional=source_pe, target_positional=target_pe,
            source_embeddings=to_numpy(network.token_embeddings(source, "source")[0]),
            target_embeddings=to_numpy(network.token_embeddings(prefix, "target")[0]),
            steps=steps, log_probability=total, settings=settings, config=network.config.to_dict(),
            model_name=model_name, device=device)


def _empty_shape(name: str, data: dict[str, Any]) -> tuple[int, int]:
    """The shape of an empty array field of a saved trace (JSON keeps none): a mask's from the token lists, an
    encoding's (0, d_model)."""
    s, t = len(data["source_ids"]), len(data["target_ids"])
    masks = {"encoder_mask": (s, s), "decoder_mask": (t, t), "cross_mask": (t, s)}
    return masks[name] if name in masks else (0, data["config"]["d_model"])


def _on_demand_maps(values: dict[str, Any], arrays_of: Callable[[str, int], dict[str, Any]]
                    ) -> dict[str, OnDemandMaps]:
    """The `OnDemandMaps` a saved trace's header names (its ``recipes``, popped from `values`), each layer's arrays
    from `arrays_of(field, layer)`, checked against the header's digest; TraceError where they disagree."""
    settings, digest = values.pop("recipes", None), values.pop("recipes_digest", None)
    if settings is None:
        return {}
    if not isinstance(settings, dict) or set(settings) - {"encoder", "decoder", "cross"}:
        raise TraceError("not a valid trace: its recipes must be a mapping of encoder, decoder or cross to layers")
    maps = {}
    for kind, layers in settings.items():
        name = f"{kind}_attentions"
        try:
            maps[name] = OnDemandMaps([recipe_from_arrays(layer, arrays_of(name, i)) for i, layer in enumerate(layers)])
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as err:
            raise TraceError(f"not a valid trace: {name} recipe: {err}") from None
    if digest != recipes_digest({name.removesuffix("_attentions"): m.recipes for name, m in maps.items()}):
        raise TraceError("trace recipes do not match their digest: the file was changed or cut after it was saved")
    return maps


def decoding_steps(tokenizer: Tokenizer, log_probs: torch.Tensor, target_ids: list[int], output_ids: list[int],
                   top_k: int) -> tuple[list[DecodingStep], float]:
    """Each step's `DecodingStep` from the teacher-forced ``(steps, vocab)`` log-probabilities, and the output's
    log-probability."""
    top = log_probs.topk(min(top_k, log_probs.shape[-1]), dim=-1)
    chosen = log_probs.gather(1, torch.tensor(output_ids, device=log_probs.device)[:, None])[:, 0]
    top_ids, top_probabilities = top.indices.tolist(), top.values.exp().tolist()  # one copy each, not one a step
    steps = []
    for t, (inp, out, probability) in enumerate(zip(target_ids, output_ids, chosen.exp().tolist())):
        steps.append(DecodingStep(
            position=t, input_id=inp, input_token=tokenizer.piece(inp), token_id=out,
            token=tokenizer.piece(out), probability=probability, top_ids=top_ids[t],
            top_tokens=tokenizer.pieces(top_ids[t]), top_probabilities=top_probabilities[t]))
    return steps, float(chosen.sum())
