"""Switch attention heads off and measure what changes: for one sentence (`ablate`) or over a corpus, one head at a
time (`head_importance`).

Ablation never touches the model: a `HeadMask` (0 = head off, see `viz_model.nn.model.HeadMask`) goes with each call
to the model's door (`TranslationModel.trace`, `translate_ids`, `sequence_log_probs`), whose searches run on a
`HeadMaskedNetwork`, a thin per-call view that hands the mask to every encode / decode of the shared network. A head
is named ``(kind, layer, head)``: kind "encoder", "decoder" or "cross", 0-based indices.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from tqdm import tqdm

from ..config import ModelConfig
from ..config.checks import check_int
from ..data.batching import DEFAULT_BATCH_TOKENS
from ..data.bleu import corpus_scores
from ..kinds.base import ModelKind, PerKind
from ..kinds.head_checks import head_items
from ..kinds.language_model import LanguageModel
from ..kinds.translator import TranslationModel
from ..nn.head_masked import HeadMaskedNetwork as HeadMaskedNetwork  # its home was here: still importable from here
from ..nn.kinds import ATTENTION_KINDS
from ..nn.model import HeadMask
from ..trace import AttentionTrace
from .inputs import check_corpus, reference_ids, source_ids

Head = tuple[str, int, int]  # (kind, layer, head), 0-based


def layer_counts(config: ModelConfig) -> dict[str, int]:
    """How many layers each attention kind has in a model of `config` (a language model: decoder only; an
    encoder-only model: encoder only; cross-attention where there are both stacks)."""
    both = config.encoder_layers and config.decoder_layers
    counts = {"encoder": config.encoder_layers, "decoder": config.decoder_layers,
              "cross": config.decoder_layers if both else 0}
    return {kind: count for kind, count in counts.items() if count}


def all_heads(config: ModelConfig) -> list[Head]:
    """Every head of the model, kind by kind (encoder, decoder, cross), then layer, then head."""
    counts = layer_counts(config)
    return [(kind, layer, head) for kind in ATTENTION_KINDS if kind in counts for layer in range(counts[kind])
            for head in range(config.heads)]


def _index(value: object, size: int, what: str) -> int:
    return check_int(what, value, 0, size - 1, error=ValueError,
                     message=f"{what} must be an integer from 0 to {size - 1}, got {value!r}")


def check_heads(config: ModelConfig, heads: Iterable[Head]) -> list[Head]:
    """The heads sorted and without repeats; each must be ``(kind, layer, head)`` within the model's sizes."""
    counts, checked = layer_counts(config), set()
    for kind, layer, head in head_items(heads, 3, "a head is (kind, layer, head), e.g. ('cross', 0, 3)"):
        if kind not in counts:
            raise ValueError(f"head kind must be one of {', '.join(counts)}; got {kind!r}" + (
                " (a language model has decoder self-attention heads only)" if set(counts) == {"decoder"} else ""))
        checked.add((kind, _index(layer, counts[kind], f"{kind} layer"), _index(head, config.heads, "head")))
    return sorted(checked, key=lambda h: (ATTENTION_KINDS.index(h[0]), h[1], h[2]))


def head_mask_for(config: ModelConfig, heads: Iterable[Head], device: torch.device | str | None = None) -> HeadMask:
    """A `HeadMask` with every kind's ``(layers, heads)`` multipliers 1, and 0 for each of `heads`."""
    counts = layer_counts(config)
    masks = {kind: torch.ones(counts[kind], config.heads, device=device) for kind in counts}
    for kind, layer, head in check_heads(config, heads):
        masks[kind][layer, head] = 0.0
    return HeadMask(**masks)


@dataclass
class TokenEdit:
    """One block of the token diff: "equal", "replace", "delete" (only intact) or "insert" (only ablated)."""

    operation: str
    intact: list[str]
    ablated: list[str]


def token_diff(intact: Sequence[str], ablated: Sequence[str]) -> list[TokenEdit]:
    """The whole of both token lists as `difflib` blocks, in order (equal blocks included)."""
    matcher = difflib.SequenceMatcher(a=list(intact), b=list(ablated), autojunk=False)
    return [TokenEdit(op, list(intact[i1:i2]), list(ablated[j1:j2])) for op, i1, i2, j1, j2 in matcher.get_opcodes()]


@dataclass
class AblationResult:
    """One sentence with and without `heads`; log-probabilities are of the intact model's output ids.

    :ivar heads: the heads switched off, ``(kind, layer, head)`` counted from 0
    :ivar intact: the intact model's translation, steps and maps
    :ivar ablated: the ablated model teacher-forced on the intact translation (same axes, its maps)
    :ivar ablated_translation: what the ablated model translates to (same search settings)
    :ivar ablated_tokens: its output pieces, ending in ``</s>``
    :ivar diff: the edits from the intact output pieces to the ablated ones
    :ivar log_prob_intact: log P(intact output) under the intact model
    :ivar log_prob_ablated: log P(intact output) under the ablated model (teacher-forced)
    """

    heads: list[Head]
    intact: AttentionTrace
    ablated: AttentionTrace
    ablated_translation: str
    ablated_tokens: list[str]
    diff: list[TokenEdit]
    log_prob_intact: float
    log_prob_ablated: float

    @property
    def translation(self) -> str:
        """The intact model's translation."""
        return self.intact.translation

    @property
    def changed(self) -> bool:
        """Whether switching the heads off changed the translation."""
        return self.ablated_translation != self.intact.translation

    @property
    def log_prob_change(self) -> float:
        """How much less likely the original output became (negative: less likely)."""
        return self.log_prob_ablated - self.log_prob_intact


ABLATE: PerKind[Callable[..., AblationResult]] = PerKind("ablate")  # (model, text, heads, *, beam, alpha, rule,
# max_new_tokens): `ablate` of each kind of model, its heads checked
IMPORTANCE: PerKind[Callable[..., pd.DataFrame]] = PerKind("head_importance")  # (model, sources, references, *,
# limit, bleu, beam, alpha, batch_tokens, progress, rule): `head_importance` of each kind of model


def ablate(model: ModelKind, text: str | list[dict[str, str]], heads: Iterable[Head], beam: int | None = None,
           alpha: float | None = None, rule: str | None = None, *, max_new_tokens: int = 20) -> AblationResult:
    """Translate `text` with and without `heads` (same search: `rule`, `beam`, `alpha`, see
    `TranslationModel.search_settings`) and score the original output under both models. A `LanguageModel`:
    continue the prompt `text` (or chat messages) greedily (`max_new_tokens`) with and without the heads,
    ``("decoder", layer, head)``."""
    chosen = check_heads(model.config, heads)
    if not chosen:
        raise ValueError("name at least one head to switch off, e.g. {('cross', 0, 3)}")
    return ABLATE.of(model)(model, text, chosen, beam=beam, alpha=alpha, rule=rule, max_new_tokens=max_new_tokens)


@ABLATE.register("translator")
def ablate_translation(model: TranslationModel, text: str, heads: list[Head], *, beam: int | None = None,
                       alpha: float | None = None, rule: str | None = None, max_new_tokens: int = 20
                       ) -> AblationResult:
    """`ablate` of a translator: its translation of `text` searched with and without `heads` (checked), and the
    intact translation's log-probability under both (`max_new_tokens` is a language model's)."""
    search = model.search_settings(rule, beam, alpha)
    mask = head_mask_for(model.config, heads, model.device)
    intact = model.trace(text, beam=beam, alpha=alpha, rule=rule)
    if not intact.translation.strip():
        raise ValueError(f"the model translates {text!r} to nothing: there is no output to compare an ablation with")
    ablated = model.trace(text, forced_ids=intact.output_ids, head_mask=mask)
    (output,) = model.translate_ids([intact.source_ids], search, head_mask=mask)  # the search `trace` ran, heads off
    pair = ([intact.source_ids], [intact.output_ids])
    tokens = model.tokenizer.pieces(output)
    return AblationResult(
        heads, intact, ablated, model.tokenizer.decode(output), tokens, token_diff(intact.output_tokens, tokens),
        float(model.sequence_log_probs(*pair)[0]), float(model.sequence_log_probs(*pair, mask)[0]))


@ABLATE.register("language_model")
def ablate_continuation(model: LanguageModel, prompt: str | list[dict[str, str]], heads: list[Head],
                        max_new_tokens: int = 20, *, beam: int | None = None, alpha: float | None = None,
                        rule: str | None = None) -> AblationResult:
    """`ablate` of a language model: its greedy continuation of `prompt` with and without `heads` (checked), and
    the intact continuation's log-probability under both (each trace's own); both traces keep their maps' recipes,
    not their maps (``maps="on_demand"``: a head's map is made when read). The search settings are a translator's."""
    if (beam, alpha, rule) != (None, None, None):
        raise ValueError("ablate continues a language model's prompt greedily: beam, alpha and rule are "
                         "translation search settings")
    mask = head_mask_for(model.config, heads, model.device)
    intact = model.trace(prompt, max_new_tokens, maps="on_demand")
    prompt_ids = intact.target_ids[:intact.settings["prompt_length"]]
    new = intact.target_ids[len(prompt_ids):]
    if not new:
        raise ValueError("max_new_tokens is 0: there is no continuation to compare an ablation with")
    ablated = model.trace(prompt, forced_ids=new, head_mask=mask, maps="on_demand")
    output = model.continue_ids(prompt_ids, max_new_tokens, mask)
    tokens = model.tokenizer.pieces(output)
    return AblationResult(  # each trace's log-probability of the continuation: no pass of its own
        heads, intact, ablated, model.tokenizer.decode(output), tokens,
        token_diff(model.tokenizer.pieces(new), tokens), intact.log_probability, ablated.log_probability)


@IMPORTANCE.register("language_model")
def continuation_importance(model: LanguageModel, prompts: Sequence[str], continuations: Sequence[str], *,
                            limit: int | None = None, bleu: bool = False, beam: int = 1, alpha: float | None = None,
                            batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: bool = False, rule: str | None = None
                            ) -> pd.DataFrame:
    """`head_importance` of a language model: the NLL of each prompt's given continuation with each head off (BLEU
    and the search settings are a translator's; `batch_tokens` is not needed: one pair at a time)."""
    if bleu or (beam, alpha, rule) != (1, None, None):
        raise ValueError("head_importance of a language model measures the NLL of the given continuations: "
                         "bleu, beam, alpha and rule are translation settings")
    texts, checked = check_corpus(prompts, continuations, limit, ("prompt", "continuation"))
    prompt_ids = [model.encode(text) for text in texts]
    continuation_ids = [model.continuation_ids(text) for text in checked or []]
    tokens = sum(len(c) for c in continuation_ids)

    def nll(mask: HeadMask | None) -> float:
        return float(-model.sequence_log_probs(prompt_ids, continuation_ids, mask).sum() / tokens)

    base = nll(None)
    rows = []
    for kind, layer, head in tqdm(all_heads(model.config), desc="heads", unit="head", disable=not progress,
                                  file=sys.stderr):
        ablated = nll(head_mask_for(model.config, [(kind, layer, head)], model.device))
        rows.append({"kind": kind, "layer": layer, "head": head, "nll": ablated, "nll_intact": base,
                     "nll_rise": ablated - base})
    return pd.DataFrame(rows)


def head_importance(model: ModelKind, sources: Sequence[str], references: Sequence[str], limit: int | None = None,
                    *, bleu: bool = False, beam: int = 1, alpha: float | None = None,
                    batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: bool = False, rule: str | None = None
                    ) -> pd.DataFrame:
    """Per head (kind, layer, head): the teacher-forced per-token NLL of `references` with that head alone off.

    Columns: nll (ablated), nll_intact, nll_rise (= nll - nll_intact, nats per token); with `bleu` also the corpus
    BLEU of decoding (`beam`, 1 = greedy; `rule`, `alpha`: see `TranslationModel.search_settings`) with the head
    off, bleu_intact and bleu_drop (slow: one search per head). A `LanguageModel`: `sources` are prompts and
    `references` the continuations whose NLL is measured (BLEU and the search settings do not apply).
    """
    if references is None:
        raise ValueError("head_importance needs the reference translations of the sources")
    return IMPORTANCE.of(model)(model, sources, references, limit=limit, bleu=bleu, beam=beam, alpha=alpha,
                                batch_tokens=batch_tokens, progress=progress, rule=rule)


@IMPORTANCE.register("translator")
def translation_importance(model: TranslationModel, sources: Sequence[str], references: Sequence[str], *,
                           limit: int | None = None, bleu: bool = False, beam: int = 1, alpha: float | None = None,
                           batch_tokens: int = DEFAULT_BATCH_TOKENS, progress: bool = False, rule: str | None = None
                           ) -> pd.DataFrame:
    """`head_importance` of a translator: the NLL of each source's reference, and with `bleu` the corpus BLEU of its
    search, with each head off."""
    search_settings = model.search_settings(rule, beam, alpha)
    texts, checked = check_corpus(sources, references, limit)
    refs = list(checked or [])
    src, out = source_ids(model, texts), reference_ids(model, refs)
    tokens = sum(len(o) for o in out)
    config = model.config

    def nll(mask: HeadMask | None) -> float:
        return float(-model.sequence_log_probs(src, out, mask, batch_tokens).sum() / tokens)

    def bleu_of(mask: HeadMask | None) -> float:  # decode as `translate` and `viz-model eval` do (the search
        # network); the NLLs are full precision
        outputs = model.translate_ids(src, search_settings, head_mask=mask)
        return corpus_scores([model.tokenizer.decode(o) for o in outputs], refs)["bleu"]

    base_nll, base_bleu = nll(None), bleu_of(None) if bleu else None
    rows = []
    for kind, layer, head in tqdm(all_heads(config), desc="heads", unit="head", disable=not progress,
                                  file=sys.stderr):
        mask = head_mask_for(config, [(kind, layer, head)], model.device)
        row = {"kind": kind, "layer": layer, "head": head, "nll": nll(mask), "nll_intact": base_nll}
        row["nll_rise"] = row["nll"] - base_nll
        if bleu:
            row["bleu"] = bleu_of(mask)
            row["bleu_intact"] = base_bleu
            row["bleu_drop"] = base_bleu - row["bleu"]
        rows.append(row)
    return pd.DataFrame(rows)
