"""`EncoderModel`: the one door to an encoder-only masked language model (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA,
ALBERT, ModernBERT, DeBERTa-v2 / v3):
`trace` every layer's self-attention over a text or a pair of texts, `fill_mask` its mask tokens.

Read-only at inference (weights come back from calls), so one instance can serve many threads.
"""

from __future__ import annotations

import dataclasses
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..modeldir.checkpoint import CheckpointError, load_model_dir, read_card
from ..nn.devices import device_label
from ..nn.encoder_lm import MaskedLM, MaskedLMOutput
from ..nn.model import HeadMask
from ..nn.score_recipe import laid_out
from ..on_demand import OnDemandMaps, check_maps
from ..tokenization.encoder_tokenizer import EncodedText, EncoderTokenizer
from ..trace import AttentionTrace
from .base import ModelKind

MAX_TEXT_CHARS = 100_000  # a guard on the text alone: the positions bound what the model reads
MAX_TOP_K = 50
FULL_MAPS_MAX_TOKENS = 512
"""An encoder's trace of up to this many tokens keeps every map with ``maps="auto"`` (BERT's, RoBERTa's and
DeBERTa's positions: all of theirs); a longer one (ModernBERT's) keeps each layer's recipe and makes a map when read."""


def check_text(text: object, name: str = "text") -> str:
    """`text` itself when it is text an encoder can read; else a one-line ValueError naming `name`."""
    if not isinstance(text, str):
        raise ValueError(f"{name} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{name} is empty: type a sentence for the model to read")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"{name} has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    if any(unicodedata.category(c) == "Cs" for c in text):
        raise ValueError(f"{name} contains unpaired surrogate code points; it is not valid Unicode text")
    return text


def check_top_k(top_k: object) -> int:
    """`top_k` when it is an integer from 1 to `MAX_TOP_K`; else one line."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    return top_k


@dataclass
class MaskPrediction:
    """What the model predicts at one mask token: the softmax over the vocabulary at that position, as transformers'
    fill-mask pipeline takes it.

    :ivar position: the mask token's position among the tokens
    :ivar ids: the top-k ids, most probable first
    :ivar tokens: their text as the pipeline writes ``token_str`` (the tokenizer's decoding of that one id)
    :ivar pieces: their pieces
    :ivar probabilities: their probabilities
    :ivar log_probability: the first one's log-probability
    """

    position: int
    ids: list[int]
    tokens: list[str]
    pieces: list[str]
    probabilities: list[float]
    log_probability: float


class EncoderModel(ModelKind):
    """An encoder-only masked language model and its tokenizer.

    :ivar network: the `MaskedLM`
    :ivar tokenizer: its `EncoderTokenizer`
    :ivar name: the model directory's name
    :ivar directory: where it was loaded from
    :ivar device: where it runs
    :ivar card: its model card's text
    """

    kind = "encoder"
    attention_kinds = ("encoder",)
    description = "an encoder (encoder-only, a masked language model)"

    def __init__(self, network: MaskedLM, tokenizer: EncoderTokenizer, name: str = "",
                 directory: Path | None = None, device: torch.device | None = None, card: str = "") -> None:
        self.device = torch.device("cpu") if device is None else device
        self.network = network.to(self.device).eval()
        self.tokenizer, self.name, self.directory, self.card = tokenizer, name, directory, card

    @classmethod
    def load(cls, directory: str | Path, device: torch.device) -> EncoderModel:
        """The encoder-only model directory `directory` on `device`; errors name the file at fault."""
        directory = Path(directory)
        network, tokenizer, _ = load_model_dir(directory)
        if not isinstance(network, MaskedLM) or not isinstance(tokenizer, EncoderTokenizer):
            raise CheckpointError(f"{directory}: an encoder-only config with another kind's tokenizer "
                                  f"({type(tokenizer).__name__})")
        return cls(network, tokenizer, directory.name, directory, device, read_card(directory))

    @property
    def has_head(self) -> bool:
        """Whether it has its masked-LM head (else it was imported from a folder without one: its maps only)."""
        return self.config.masked_lm_head

    def check_head(self, what: str) -> None:
        """One line where `what` needs the masked-LM head this model lacks."""
        if not self.has_head:
            raise ValueError(f"{what} needs a masked-language-model head, and {self.name or 'this model'} has none "
                             "(its folder is a sequence classifier or another model without one): it opens for its "
                             "attention maps only (trace)")

    @property
    def mask_token(self) -> str:
        """The text of the mask token (``[MASK]``, ``<mask>``)."""
        return self.tokenizer.mask_token

    def encoded(self, text: str, text_pair: str | None = None) -> EncodedText:
        """`text` (and `text_pair`) as the model reads them: ids, token types and words; one line where they are
        no text or longer than the model's positions (a pair's naming both lengths and the limit)."""
        check_text(text)
        if text_pair is not None:
            check_text(text_pair, "text_pair")
        encoded = self.tokenizer.encoded(text, text_pair)
        limit = self.network.longest
        if len(encoded.ids) > limit:
            n = len(encoded.ids)
            what = (f"the pair gives {n} tokens (the text {encoded.lengths[0]}, text_pair {encoded.lengths[1]}, "
                    f"{n - sum(encoded.lengths)} special)" if text_pair is not None else f"the text gives {n} tokens")
            raise ValueError(f"{what}; this model reads at most {limit} (max_position_embeddings)")
        return encoded

    def encode(self, text: str, text_pair: str | None = None) -> list[int]:
        """The ids of `text` (and `text_pair`), special tokens included."""
        return self.encoded(text, text_pair).ids

    def layer_mask(self, head_mask: HeadMask | None) -> torch.Tensor | None:
        """The network's ``(layers, heads)`` multipliers of a `HeadMask`; one line where it names decoder or cross
        heads, which an encoder has none of."""
        if head_mask is None:
            return None
        if head_mask.decoder is not None or head_mask.cross is not None:
            raise ValueError("an encoder (encoder-only) has encoder self-attention heads only: no decoder or cross "
                             "heads to switch off")
        return None if head_mask.encoder is None else head_mask.encoder.to(self.device)

    def forced_pass(self, ids: Sequence[int], type_ids: Sequence[int] | None = None, *,
                    head_mask: HeadMask | None = None, need_weights: bool | str = False,
                    token_embeddings: torch.Tensor | None = None,
                    key_mask: torch.Tensor | None = None) -> MaskedLMOutput:
        """The network over `ids` (one sequence), batch 1 (or the batch of `token_embeddings` ``(batch, len,
        embedding width)``, given in place of the ids' own: gradients); `need_weights`: every layer's record
        (``"recipe"``: its `ScoreRecipe`); `key_mask` ``(len, len)``: keys hidden from queries in every layer (True =
        may attend). Gradients flow where the caller enables them. Without the masked-LM head, only for the records
        (the logits are None)."""
        if not need_weights:
            self.check_head("a pass for the logits")
        tensor = torch.tensor([list(ids)], device=self.device)
        types = None if type_ids is None else torch.tensor([list(type_ids)], device=self.device)
        if token_embeddings is not None:
            tensor = tensor.expand(token_embeddings.shape[0], -1)
            types = None if types is None else types.expand(token_embeddings.shape[0], -1)
        return self.network(tensor, types, need_weights=need_weights, head_mask=self.layer_mask(head_mask),
                            token_embeddings=token_embeddings, key_mask=key_mask)

    def embeddings(self, ids: Sequence[int]) -> torch.Tensor:
        """``(1, len, embedding width)`` the token embeddings of `ids`, before positions and token types are
        added."""
        return self.network.token_embeddings(torch.tensor([list(ids)], device=self.device))

    def mask_positions(self, ids: Sequence[int]) -> list[int]:
        """The positions of the mask token in `ids`."""
        return [i for i, token in enumerate(ids) if token == self.tokenizer.mask_id]

    def predictions(self, logits: torch.Tensor, positions: list[int], top_k: int) -> list[MaskPrediction]:
        """Per mask position of `logits` ``(len, vocab)``, its `top_k` predictions."""
        found = []
        for position in positions:
            row = logits[position].float()
            top = torch.softmax(row, dim=-1).topk(min(top_k, row.shape[-1]))  # as the pipeline ranks them
            ids = top.indices.tolist()
            found.append(MaskPrediction(position, ids, [self.tokenizer.token_text(i) for i in ids],
                                        self.tokenizer.pieces(ids), top.values.tolist(),
                                        float(torch.log_softmax(row, dim=-1)[ids[0]])))
        return found

    @torch.inference_mode()
    def fill_mask(self, text: str, top_k: int = 5, text_pair: str | None = None,
                  head_mask: HeadMask | None = None) -> list[list[tuple[str, float]]]:
        """For each mask token of `text` (and `text_pair`), in order, its `top_k` (token, probability), most
        probable first: the token as transformers' fill-mask pipeline writes ``token_str``; one line where the text
        has no mask token, or the model no masked-LM head. `head_mask` switches heads off."""
        self.check_head("fill_mask")
        top_k = check_top_k(top_k)
        encoded = self.encoded(text, text_pair)
        positions = self.mask_positions(encoded.ids)
        if not positions:
            raise ValueError(f"the text has no mask token: write {self.mask_token} where the model should fill in "
                             "a word")
        logits = self.forced_pass(encoded.ids, encoded.type_ids, head_mask=head_mask).logits[0]
        return [list(zip(found.tokens, found.probabilities)) for found in self.predictions(logits, positions, top_k)]

    @torch.inference_mode()
    def sequence_log_probs(self, inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                           head_mask: HeadMask | None = None) -> np.ndarray:
        """The masked-LM ``log P(outputs | input)`` of each (input ids, output ids) pair: the input's mask positions,
        in order, scored for the output's ids (one per mask), summed."""
        self.check_head("sequence_log_probs")
        if len(inputs) != len(outputs):
            raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs: the lists must align")
        result = np.zeros(len(inputs), dtype=np.float64)
        for i, (ids, chosen) in enumerate(zip(inputs, outputs)):
            positions = self.mask_positions(ids)
            if not positions or len(positions) != len(chosen):
                raise ValueError(f"pair {i + 1}: {len(chosen)} output ids for {len(positions)} mask tokens; give one "
                                 "id per mask token")
            logits = self.forced_pass(ids, head_mask=head_mask).logits[0, positions].float()
            log_probs = torch.log_softmax(logits, dim=-1)
            result[i] = float(log_probs[torch.arange(len(positions)), torch.tensor(list(chosen))].sum())
        return result

    def recipe_maps(self, recipes: Sequence[object]) -> OnDemandMaps:
        """The maps of a pass's recipes (``need_weights="recipe"``), made when read: every key visible, the windowed
        layers' within `window_radius` on either side."""
        cfg = self.config
        return OnDemandMaps([laid_out(recipe, radius=cfg.window_radius if i in cfg.windowed_layers else None)
                             for i, recipe in enumerate(recipes)])  # type: ignore[arg-type]

    @torch.inference_mode()
    def trace(self, text: str, text_pair: str | None = None, *, top_k: int = 5,  # type: ignore[override]
              head_mask: HeadMask | None = None, forced_ids: Sequence[int] | None = None,
              maps: str = "auto") -> AttentionTrace:
        """Every layer's self-attention over `text` (and `text_pair`), special tokens included, and the top-k
        predictions at each mask token; `head_mask` switches heads off.

        The maps are the trace's encoder maps (``encoder_attentions[layer]`` is ``(heads, n, n)``, the tokens its
        source tokens); the decoder and cross lists are empty and there are no decoding steps. ``settings`` holds
        the token types (``type_ids``) and, per mask token, its ``predictions`` (a `MaskPrediction` as a dict);
        ``translation`` is the text with every mask filled by its most probable token, ``log_probability`` the sum
        of those tokens' log-probabilities (without the masked-LM head: no predictions, the text as read). `maps`:
        "full" keeps every map, "on_demand" each layer's recipe (`OnDemandMaps`: a map is made when read; not
        DeBERTa's), "auto" every map up to `FULL_MAPS_MAX_TOKENS` tokens, recipes beyond."""
        if forced_ids is not None:
            raise ValueError("an encoder reads its input whole: it has no output to force (forced_ids)")
        disentangled = self.config.positional == "disentangled"
        if check_maps(maps) == "on_demand" and disentangled:
            raise ValueError("DeBERTa's maps are kept in full (its position terms are no score recipe): use maps="
                             "'auto' or 'full'")
        top_k = check_top_k(top_k)
        start = time.perf_counter()
        encoded = self.encoded(text, text_pair)
        ids, n = encoded.ids, len(encoded.ids)
        on_demand = not disentangled and (maps == "on_demand" or maps == "auto" and n > FULL_MAPS_MAX_TOKENS)
        out = self.forced_pass(ids, encoded.type_ids, head_mask=head_mask,
                               need_weights="recipe" if on_demand else True)
        ran = time.perf_counter()
        predictions = [] if out.logits is None else self.predictions(out.logits[0], self.mask_positions(ids), top_k)
        filled = list(ids)
        for found in predictions:
            filled[found.position] = found.ids[0]
        trace = AttentionTrace.encoder_only(
            text=text, filled=self.tokenizer.decode(filled), ids=ids, tokens=self.tokenizer.pieces(ids),
            words=encoded.words, maps=self.recipe_maps(out.records) if on_demand else
            [record.weights[0].float().cpu().numpy() for record in out.records],
            positional=self.network.position_vectors(out.positions)[0].float().cpu().numpy(),
            embeddings=self.embeddings(ids)[0].float().cpu().numpy(),
            log_probability=float(sum(found.log_probability for found in predictions)),
            settings={"top_k": top_k, "head_mask": head_mask is not None, "type_ids": encoded.type_ids,
                      "text_pair": text_pair, "predictions": [dataclasses.asdict(found) for found in predictions]},
            config=self.config.to_dict(), model_name=self.name, device=device_label(self.device),
            timings={"trace_ms": 1000 * (ran - start), "total_ms": 1000 * (time.perf_counter() - start)})
        trace.validate()
        return trace
