"""`LanguageModel`: the one door to a decoder-only language model (GPT-2, Llama, Mistral, Qwen2, or one trained
here), as `TranslationModel` is to a translator: `complete` a prompt greedily (`chat`: messages through the model's chat
template), `trace` every attention map over the prompt and its continuation. `viz_model.load` returns one for a
decoder-only model directory.

Read-only at inference (weights and caches come back from calls), so one instance can serve many threads.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..modeldir.checkpoint import CheckpointError, has_weight_source, load_model_dir, read_card
from ..nn.attention import KVCache
from ..nn.causal_lm import CausalLM, CausalLMOutput, maps_block, window_mask
from ..nn.head_patch import HeadPatch
from ..nn.kv_window import moved_keys
from ..nn.lens_reading import LogitLens, check_lens, read_lens
from ..nn.model import HeadMask
from ..nn.position_setup import score_schemes
from ..nn.quantize import LazyInt8Copy, int8_causal_network
from ..nn.score_recipe import merged
from ..on_demand import OnDemandMaps, check_maps, keeps_full_maps
from ..search.causal import LMSearch, add_call, beam_continuation, cut_cache, verified_greedy
from ..search.next_token import DRAFT_MIN_PARAMETERS
from ..tokenization.lm_sentencepiece import SentencePieceLM
from ..tokenization.lm_tokenizer import LMTokenizer
from ..tokenization.tokenizer import Tokenizer
from ..trace import AttentionTrace, DecodingStep
from .base import ModelKind
from .head_checks import head_items

MAX_PROMPT_CHARS = 1_000_000  # a guard on the text alone: the positions and the memory estimate bound a prompt
MAX_NEW_TOKENS = 1024
MAX_TOP_K = 50
ROWS_AT_ONCE = 64  # rows of logits softmaxed at a time in a trace
MAX_BEAM = 16
INPUT_POSITIONS = ("learned", "sinusoidal")  # a table of positions: nothing past its last row
DRAFTS = ("auto", "int8", "off")
PATCH_TOKENS = 4096  # tokens a patched batch runs at once (rows of one prompt)


def check_prompt(prompt: object) -> str:
    """`prompt` itself when it is text a model can continue; else a one-line ValueError saying why."""
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be a string, got {type(prompt).__name__}")
    if not prompt.strip():
        raise ValueError("prompt is empty: type some text for the model to continue")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"prompt has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}")
    if any(unicodedata.category(c) == "Cs" for c in prompt):
        raise ValueError("prompt contains unpaired surrogate code points; it is not valid Unicode text")
    return prompt


def check_count(value: object, name: str, low: int, high: int) -> int:
    """`value` when it is an integer from `low` to `high`; else a one-line ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


PATCHED_HEAD = "a head is a (layer, head) pair of integers, e.g. (0, 1)"  # what a patched head must be


def check_patched_heads(heads: object, layers: int, per_layer: int) -> list[tuple[int, int]]:
    """`heads` as sorted distinct (layer, head) pairs (0-based) when each is inside the model; else one line."""
    if isinstance(heads, (str, bytes)) or not hasattr(heads, "__iter__"):
        raise ValueError(f"heads must be a list of (layer, head) pairs, got {heads!r}")
    checked = set()
    for item in head_items(heads, 2, PATCHED_HEAD):
        if any(isinstance(i, bool) or not isinstance(i, int) for i in item):
            raise ValueError(f"{PATCHED_HEAD}; got {item!r}")
        if not (0 <= item[0] < layers and 0 <= item[1] < per_layer):
            raise ValueError(f"head {tuple(item)} is outside the model: layers 0 to {layers - 1}, heads 0 to "
                             f"{per_layer - 1} (0-based)")
        checked.add((item[0], item[1]))
    return sorted(checked)


def check_same_length(prompt: Sequence[int], source: Sequence[int]) -> None:
    """One line where the source run is not as many tokens as the prompt (heads are patched position by position)."""
    if len(source) != len(prompt):
        raise ValueError(f"the source has {len(source)} tokens and the prompt {len(prompt)}: patching swaps head "
                         "outputs position by position, so both need the same token count")


def shared_prefix(prompt: Sequence[int], source: Sequence[int]) -> int:
    """How many leading tokens the two runs share (their head outputs there are the same)."""
    return next((i for i, (a, b) in enumerate(zip(prompt, source)) if a != b), min(len(prompt), len(source)))


class LanguageModel(ModelKind):
    """A decoder-only language model and its tokenizer.

    :ivar network: the `CausalLM`
    :ivar tokenizer: its `LMTokenizer` (an imported model's) or `SentencePieceLM` (one `viz-model train` trained)
    :ivar name: the model directory's name
    :ivar directory: where it was loaded from (None once that is gone: `from_transformers`)
    :ivar device: where it runs
    :ivar card: its model card's text
    :ivar search: its generation config's search settings (beam width, penalties), applied as ``generate`` applies
        them
    :ivar draft: who drafts a greedy continuation that the network verifies (`draft_network`): "auto", "int8", "off"
    """

    kind = "language_model"
    attention_kinds = ("decoder",)
    description = "a language model (decoder-only)"

    def __init__(self, network: CausalLM, tokenizer: LMTokenizer | SentencePieceLM, name: str = "",
                 directory: Path | None = None, device: torch.device | None = None, card: str = "") -> None:
        self.device = torch.device("cpu") if device is None else device
        self.network = network.to(self.device).eval()
        self.tokenizer, self.name, self.directory, self.card = tokenizer, name, directory, card
        try:
            self.search = LMSearch(**tokenizer.rules.get("generation", {}))  # none: a model trained here
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"{tokenizer.path or name}: lm_tokenizer.json's generation settings: "
                                  f"{err}") from None
        self._sampling_said = False
        self._int8 = LazyInt8Copy(int8_causal_network)  # built on the first drafted continuation, then kept
        self.draft = "auto"

    @classmethod
    def load(cls, directory: str | Path, device: torch.device) -> LanguageModel:
        """The decoder-only model directory `directory` on `device`; errors name the file at fault."""
        directory = Path(directory)
        if has_weight_source(directory):  # weights read where they are, in the dtype the device computes in
            from ..hf.mapped_load import mapped_model

            network, tokenizer = mapped_model(directory, device)
        else:
            network, tokenizer, _ = load_model_dir(directory)
        if isinstance(tokenizer, Tokenizer):  # a model `viz-model train` trained: this project's SentencePiece
            tokenizer = SentencePieceLM(tokenizer)
        if not isinstance(network, CausalLM) or not isinstance(tokenizer, (LMTokenizer, SentencePieceLM)):
            raise CheckpointError(f"{directory}: a decoder-only config with a translator's tokenizer "
                                  f"({type(tokenizer).__name__}); a language model has its own or this project's")
        return cls(network, tokenizer, directory.name, directory, device, read_card(directory))

    def encode(self, prompt: str | list[dict[str, str]], max_new_tokens: int = 0) -> list[int]:
        """The prompt's ids (a list of chat messages: through the chat template); one line where it is empty, or
        where it and `max_new_tokens` do not fit the model's positions (a table of learned positions ends there); a
        warning past a RoPE model's trained length."""
        if self.tokenizer.rules["sampling"] and not self._sampling_said:
            self._sampling_said = True
            warnings.warn("this model's generation config samples (do_sample); viz-model decodes greedily, as "
                          "generate(do_sample=False)", stacklevel=3)
        ids = self.tokenizer.chat_ids(prompt) if isinstance(prompt, list) else self.tokenizer.encode(
            check_prompt(prompt))
        if not ids:
            raise ValueError("prompt gives no tokens: type some text for the model to continue")
        limit, needed = self.config.max_positions, len(ids) + max_new_tokens
        if needed > limit and self.config.positional in INPUT_POSITIONS:
            raise ValueError(f"prompt of {len(ids)} tokens plus {max_new_tokens} new ones needs {needed} positions; "
                             f"this model has {limit} (max_position_embeddings)")
        if needed > limit:
            warnings.warn(f"{needed} positions are past the {limit} this model was trained on; its attention there "
                          "is untested", stacklevel=3)
        return ids

    def layer_mask(self, head_mask: HeadMask | None) -> torch.Tensor | None:
        """The network's ``(layers, heads)`` multipliers of a `HeadMask`; one line where it names encoder or cross
        heads, which a language model has none of."""
        if head_mask is None:
            return None
        if head_mask.encoder is not None or head_mask.cross is not None:
            raise ValueError("a language model (decoder-only) has decoder self-attention heads only: no encoder or "
                             "cross heads to switch off")
        return None if head_mask.decoder is None else head_mask.decoder.to(self.device)

    @torch.inference_mode()
    def continue_ids(self, ids: list[int], max_new_tokens: int = 20, head_mask: HeadMask | None = None) -> list[int]:
        """The greedy continuation of `ids` (as ``generate(do_sample=False, num_beams=1)``, the generation config's
        repetition penalty and n-gram ban applied): up to `max_new_tokens` ids, the end-of-text id that stopped it
        included; `head_mask` switches heads off."""
        max_new_tokens = check_count(max_new_tokens, "max_new_tokens", 0, MAX_NEW_TOKENS)
        return self._decoded(ids, max_new_tokens, False, self.layer_mask(head_mask))[0]

    @property
    def draft(self) -> str:
        return self._draft_mode

    @draft.setter
    def draft(self, mode: str) -> None:
        if mode not in DRAFTS:
            raise ValueError(f"draft must be one of {', '.join(DRAFTS)}, got {mode!r}")
        self._draft_mode = mode

    @property
    def draft_held(self) -> bool:
        """Whether `draft_network`'s int8 copy is built already (its memory held)."""
        return self._int8.built

    def draft_network(self) -> CausalLM | None:
        """The int8 copy of the network that drafts a greedy continuation (the network verifies every token, so the
        continuation and maps are its own), or None: the network decodes alone. ``draft="auto"``: float32 on the CPU
        with at least `DRAFT_MIN_PARAMETERS` (GPT-2-small size: yes); "int8": wherever int8 can run; "off": never; never
        with dynamic RoPE scaling (one token per pass, as generate runs)."""
        if self.draft == "off":
            return None
        if self.network.one_token_per_pass:  # a draft's tokens are verified several to a pass
            if self.draft == "int8":
                raise ValueError("an int8 draft verifies several tokens in one pass, and this model's dynamic RoPE "
                                 "scaling turns by the length each pass reaches: set draft to auto or off")
            return None
        dtype = next(self.network.parameters()).dtype
        if self.device.type != "cpu" or dtype != torch.float32:
            if self.draft == "int8":
                raise ValueError(f"an int8 draft runs on the CPU with float32 weights; this model runs on "
                                 f"{self.device.type} in {dtype}: set draft to auto or off")
            return None
        if self.draft == "auto" and self.network.num_parameters() < DRAFT_MIN_PARAMETERS:
            return None
        return self._int8.get(self.network)

    def _maps_block(self, rows: int) -> list[torch.Tensor] | None:
        """`maps_block` for a first recorded call of `rows` tokens on the CPU, else None (the maps stay where the
        network computes them)."""
        return maps_block(self.network, 1, rows, rows) if self.device.type == "cpu" else None

    def _choice(self, logits: torch.Tensor, ids: list[int]) -> int:
        """The greedy id after `ids` from their ``(1, vocab)`` `logits`, the search settings applied."""
        return int(self.search.processed(logits.float(), [ids]).argmax())

    def _decoded(self, ids: list[int], max_new_tokens: int, record: bool, mask: torch.Tensor | None,
                 forced: Sequence[int] | None = None, weights: str = "maps") -> tuple[list[int], list[CausalLMOutput]]:
        """The greedy continuation of `ids` with the KV cache (`forced`: these ids instead), and with `record` each
        call's output with its maps and every position's logits (the last new token run too: its maps and the
        choice after it; ``weights="recipe"``: each layer's recipe in place of its maps). Drafted in int8 and
        verified where `draft_network` says so."""
        draft = self.draft_network() if forced is None and max_new_tokens else None
        if draft is not None:
            found = verified_greedy(self.network, draft, ids, max_new_tokens, self._choice, self.tokenizer.eos_ids,
                                    record, mask, self._maps_block if record else None, weights)
            return found.tokens, found.calls
        new: list[int] = []
        calls: list[CausalLMOutput] = []
        cache: list[KVCache] | None = None
        step = torch.tensor([ids], device=self.device)
        while record or len(new) < max_new_tokens:
            out = self.network(step, need_weights=weights if record else False, cache=cache, head_mask=mask,
                               last_logits=not record, maps_into=self._maps_block(len(ids)) if record and
                               weights == "maps" and cache is None else None)
            cache = out.cache
            if record:
                add_call(calls, out)
                if len(new) == max_new_tokens or (forced is None and new and new[-1] in self.tokenizer.eos_ids):
                    break
            token = (int(self.search.processed(out.logits[:1, -1].float(), [ids + new]).argmax()) if forced is None
                     else int(forced[len(new)]))
            new.append(token)
            if not record and token in self.tokenizer.eos_ids:
                break
            step = torch.tensor([[token]], device=self.device)
        return new, calls

    def beam_ids(self, ids: list[int], beam: int, max_new_tokens: int = 20) -> list[int]:
        """The continuation of `ids` by transformers' beam search (``generate(num_beams=beam, do_sample=False)``, with
        the generation config's length penalty, early stopping, repetition penalty and n-gram ban), ending at any of
        the model's end-of-text ids."""
        beam = check_count(beam, "beam", 1, MAX_BEAM)
        max_new_tokens = check_count(max_new_tokens, "max_new_tokens", 0, MAX_NEW_TOKENS)
        if beam == 1 or max_new_tokens == 0:
            return self.continue_ids(ids, max_new_tokens)
        return beam_continuation(self.network, ids, beam, max_new_tokens, self.tokenizer.eos_ids, self.search).tokens

    # --- the door of the layers above (analysis, attribution): prompt + continuation, teacher-forced -----------------
    def forced_pass(self, ids: Sequence[int], *, head_mask: HeadMask | None = None, need_weights: bool = False,
                    token_embeddings: torch.Tensor | None = None, key_mask: torch.Tensor | None = None
                    ) -> CausalLMOutput:
        """The full-precision network over `ids` (a prompt and a continuation, one sequence), batch 1 (or the batch of
        `token_embeddings` ``(batch, len, d_model)``, given in place of the ids' own: gradients); `need_weights`:
        every layer's record; `key_mask` ``(len, len)`` (True = may attend): keys hidden beyond the causal mask.
        Gradients flow where the caller enables them."""
        tensor = torch.tensor([list(ids)], device=self.device)
        if token_embeddings is not None:
            tensor = tensor.expand(token_embeddings.shape[0], -1)
        return self.network(tensor, need_weights=need_weights, head_mask=self.layer_mask(head_mask),
                            token_embeddings=token_embeddings, key_mask=key_mask)

    @torch.inference_mode()
    def continue_with_key_mask(self, ids: list[int], max_new_tokens: int, key_mask: torch.Tensor) -> list[int]:
        """The greedy continuation of `ids` as `continue_ids` finds it, every call's keys also masked by `key_mask`
        ``(m, m)``, m >= len(ids) + max_new_tokens (row i: the keys position i may see, True = may attend)."""
        max_new_tokens = check_count(max_new_tokens, "max_new_tokens", 0, MAX_NEW_TOKENS)
        if key_mask.dim() != 2 or min(key_mask.shape) < len(ids) + max_new_tokens:
            raise ValueError(f"key_mask must be (m, m) with m >= {len(ids) + max_new_tokens} (prompt and new "
                             f"tokens), got {tuple(key_mask.shape)}")
        new: list[int] = []
        cache, step = None, torch.tensor([ids], device=self.device)
        while len(new) < max_new_tokens and not (new and new[-1] in self.tokenizer.eos_ids):
            offset = len(ids) + len(new) - step.shape[1]
            out = self.network(step, cache=cache, last_logits=True,
                               key_mask=key_mask[offset:offset + step.shape[1], :offset + step.shape[1]])
            cache = out.cache
            new.append(int(self.search.processed(out.logits[:1, -1].float(), [ids + new]).argmax()))
            step = torch.tensor([new[-1:]], device=self.device)
        return new

    @torch.inference_mode()
    def pass_after(self, ids: torch.Tensor, cache: list[KVCache], positions: torch.Tensor) -> CausalLMOutput:
        """The full-precision network over new `ids` ``(batch, len)`` after `cache` (keys as this network rotated
        them) with its keys moved to `positions` ``(batch, keys)`` first: StreamingLLM's evicted cache, re-indexed."""
        return self.network(ids.to(self.device), cache=moved_keys(self.network, cache, positions.to(self.device)))

    def rescaled(self, **rope: object) -> LanguageModel:
        """A copy of this model whose RoPE settings are `rope` (``rope_scaling``, ``rope_factor``, ... of
        `ModelConfig`), its rotation built for the copy: the weights shared, this model and its network untouched."""
        if self.config.positional != "rope" or any(not name.startswith("rope_") for name in rope):
            raise ValueError(f"rescaled changes the RoPE settings of a RoPE model; got {sorted(rope)} for "
                             f"{self.config.positional} positions")
        network = copy.copy(self.network)  # the same modules and weights, a config and a rotation of its own
        network.config = dataclasses.replace(self.config, **rope)
        network.scheme = score_schemes(network.config)[0]
        model = copy.copy(self)
        model.network, model._int8 = network, LazyInt8Copy(int8_causal_network)  # its own draft, if it drafts
        return model

    def embeddings(self, ids: Sequence[int]) -> torch.Tensor:
        """``(1, len, d_model)`` the token embeddings the network adds its input positions to (scaled where the
        config scales them)."""
        return self.network.token_embeddings(torch.tensor([list(ids)], device=self.device))

    def continuation_ids(self, text: str) -> list[int]:
        """The ids of `text` as it follows a prompt: no special tokens added; one line where it gives none."""
        ids = self.tokenizer.continuation_ids(check_prompt(text))
        if not ids:
            raise ValueError(f"the continuation {text!r} gives no tokens")
        return ids

    @torch.inference_mode()
    def sequence_log_probs(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]],
                           head_mask: HeadMask | None = None) -> np.ndarray:
        """``log P(continuation | prompt)`` of each (prompt ids, continuation ids) pair under the full-precision
        network, teacher-forced, in input order."""
        if len(prompts) != len(continuations):
            raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations: the lists must align")
        result = np.zeros(len(prompts), dtype=np.float64)
        for i, (prompt, continuation) in enumerate(zip(prompts, continuations)):
            if not prompt or not continuation:
                raise ValueError(f"pair {i + 1}: a prompt and a continuation of at least one token each are needed")
            ids = [*prompt, *continuation]
            logits = self.forced_pass(ids[:-1], head_mask=head_mask).logits[0, len(prompt) - 1:].float()
            chosen = torch.log_softmax(logits, dim=-1)[torch.arange(len(continuation)), torch.tensor(continuation)]
            result[i] = float(chosen.sum())
        return result

    @torch.inference_mode()
    def logit_lens(self, prompt: str | list[dict[str, str]], /, top_k: int = 5, *, track: Sequence[int] = ()
                   ) -> LogitLens:
        """The logit lens of `prompt` (text, or chat messages): the embeddings and the residual stream after each
        block, each read through the final norm and the unembedding (soft-capped where the model caps its logits);
        the last row is the model's own output. `track`: token ids whose rank and probability it follows."""
        top_k, track = check_lens(top_k, track, self.config.vocab_size)
        ids = self.encode(prompt)
        out = self.network(torch.tensor([ids], device=self.device), states=True)
        return read_lens(ids, out.states, self.network.unembed, top_k, track, self.pieces)

    # --- activation patching: heads' outputs from a run of another prompt of as many tokens --------------------------
    @torch.inference_mode()
    def head_outputs(self, ids: Sequence[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The next-token logits ``(vocab,)`` at the last position of `ids`, and per layer ``(1, heads, len,
        d_head)`` each head's output before the output projection (what `patched_runs` swaps in)."""
        out = self.forced_pass(ids, need_weights=True)
        return out.logits[0, -1], [record.head_outputs for record in out.records]

    @torch.inference_mode()
    def patched_runs(self, ids: Sequence[int], source: list[torch.Tensor],
                     rows: Sequence[Sequence[tuple[int, int]]], shared: int = 0) -> torch.Tensor:
        """``(len(rows), vocab)``: the next-token logits at the last position of `ids`, one row per entry of `rows`,
        whose heads ((layer, head), 0-based) take their outputs from `source` (`head_outputs` of a run over as many
        tokens). Rows run in batches of `PATCH_TOKENS` tokens by the first layer they patch, each from the unpatched
        run's residual stream entering it (the layers below are the unpatched run's); the first `shared` positions,
        where the source's tokens are the prompt's (`shared_prefix`), are the unpatched run's keys and values (not run
        again; all are run under dynamic RoPE scaling, whose rotation depends on a pass's length)."""
        layers, heads = self.config.decoder_layers, self.num_heads
        if len(source) != layers:
            raise ValueError(f"source holds the head outputs of {len(source)} layers; this model has {layers}")
        check_same_length(ids, range(source[0].shape[-2]))
        checked = [check_patched_heads(patched, layers, heads) for patched in rows]
        chosen = torch.zeros(len(rows), layers, heads, dtype=torch.bool)
        for row, patched in enumerate(checked):
            for layer, head in patched:
                chosen[row, layer, head] = True
        known = 0 if self.network.one_token_per_pass else max(0, min(shared, len(ids) - 1))
        run = self.forced_pass(ids, need_weights=True)
        streams = [record.residual[:, known:] for record in run.records]
        prefix = cut_cache(run.cache, known)
        source = [outputs[..., known:, :] for outputs in source]
        starts = torch.tensor([patched[0][0] if patched else 0 for patched in checked], dtype=torch.long)
        tensor = torch.tensor([list(ids[known:])], device=self.device)
        per_batch = max(1, PATCH_TOKENS // (len(ids) - known))
        order, logits = [], []
        for start in starts.unique().tolist():
            for part in (starts == start).nonzero()[:, 0].split(per_batch):
                patch = HeadPatch(source, chosen[part].to(self.device), start, streams[start] if start else None)
                copies = torch.zeros(len(part), dtype=torch.long, device=self.device)
                cache = [kv.index_select(copies) for kv in prefix] if known else None
                logits.append(self.network(tensor.expand(len(part), -1), cache=cache, last_logits=True,
                                           head_patch=patch).logits[:, -1])
                order.append(part)
        if not logits:
            return torch.zeros(0, self.config.vocab_size, device=self.device)
        return torch.cat(logits)[torch.cat(order).argsort().to(self.device)]

    def patched_logits(self, prompt: str, source: str, heads: Sequence[tuple[int, int]]) -> torch.Tensor:
        """``(vocab,)`` the next-token logits at the prompt's last position when `heads` ((layer, head), 0-based)
        take their outputs (before the output projection) from a run of `source`, a prompt of the same token count;
        one line for a source of another length or a head outside the model."""
        ids, source_ids = self.encode(prompt), self.encode(source)
        check_same_length(ids, source_ids)
        check_patched_heads(heads, self.config.decoder_layers, self.num_heads)
        return self.patched_runs(ids, self.head_outputs(source_ids)[1], [heads], shared_prefix(ids, source_ids))[0]

    def complete(self, prompt: str | list[dict[str, str]], max_new_tokens: int = 20, beam: int | None = None) -> str:
        """The continuation of `prompt` (text, or chat messages: see `chat`), alone, decoded without special tokens,
        as ``generate(do_sample=False)`` finds it: with `beam` beams (None: the generation config's num_beams, greedy
        where it sets none)."""
        max_new_tokens = check_count(max_new_tokens, "max_new_tokens", 0, MAX_NEW_TOKENS)
        ids = self.encode(prompt, max_new_tokens)
        new = self.beam_ids(ids, self.search.num_beams if beam is None else beam, max_new_tokens)
        return self.tokenizer.decode(new)

    def chat(self, messages: list[dict[str, str]], max_new_tokens: int = 20) -> str:
        """The assistant's reply to `messages` ({"role": system, user, assistant or tool, "content": text}), rendered
        by the model's own chat template as ``apply_chat_template(add_generation_prompt=True)``; searched as
        `complete` searches. A string is refused (it would be continued as it is, without the template)."""
        if isinstance(messages, str):
            raise ValueError("messages must be a list of {'role': ..., 'content': ...} dicts, got a string (to "
                             "continue text as it is, without the chat template, use complete)")
        return self.complete(messages, max_new_tokens)

    @torch.inference_mode()
    def trace(self, prompt: str | list[dict[str, str]], max_new_tokens: int = 20, top_k: int = 5, *,
              head_mask: HeadMask | None = None, forced_ids: Sequence[int] | None = None,
              maps: str = "auto") -> AttentionTrace:
        """Every attention map over `prompt` (text, or chat messages: then the template's tokens too) and its greedy
        continuation (``max_new_tokens=0``: the prompt alone; `forced_ids`: this continuation instead, its length
        `max_new_tokens`); `head_mask` switches heads off.

        ``decoder_attentions[layer]`` is ``(query heads, n, n)``; the encoder and cross lists are empty; step t
        read token t and names the token after it (the next one of the text, then the model's choice after the
        last) with the top-k candidates. `maps`: "full" keeps every map, "on_demand" keeps each layer's recipe and
        makes a map when it is read (`OnDemandMaps`), "auto" the first up to `FULL_MAPS_MAX_TOKENS` tokens."""
        if forced_ids is not None:
            vocab = self.config.vocab_size
            if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab for i in forced_ids):
                raise ValueError(f"forced_ids must be token ids from 0 to {vocab - 1}")
            max_new_tokens = len(forced_ids)
        max_new_tokens = check_count(max_new_tokens, "max_new_tokens", 0, MAX_NEW_TOKENS)
        top_k = check_count(top_k, "top_k", 1, MAX_TOP_K)
        check_maps(maps)
        start = time.perf_counter()
        prompt_ids = self.encode(prompt, max_new_tokens)
        on_demand = not keeps_full_maps(maps, len(prompt_ids) + max_new_tokens)
        new, calls = self._decoded(prompt_ids, max_new_tokens, True, self.layer_mask(head_mask), forced_ids,
                                   "recipe" if on_demand else "maps")
        decoded = time.perf_counter()
        ids = prompt_ids + new
        attentions = recorded_recipes(calls) if on_demand else recorded_maps(calls, len(ids))
        internals = recorded_internals(calls)
        outputs = ids[1:] + [int(calls[-1].logits[0, -1].argmax())]
        chosen, top_ids, top_probabilities, log_chosen = next_token_candidates([out.logits[0] for out in calls],
                                                                               outputs, top_k)
        del calls
        tokens = self.tokenizer.pieces(ids)
        steps = [DecodingStep(t, ids[t], tokens[t], outputs[t], self.tokenizer.piece(outputs[t]), chosen[t],
                              top_ids[t], self.tokenizer.pieces(top_ids[t]), top_probabilities[t])
                 for t in range(len(ids))]
        log_probability = float(sum(log_chosen[len(prompt_ids) - 1:len(ids) - 1]))
        n, d = len(ids), self.config.d_model
        ids_tensor = torch.tensor([ids], device=self.device)
        table = self.network.positions
        positional = torch.zeros(n, d) if table is None else table(n)  # RoPE, ALiBi: nothing added to the input
        text = self.tokenizer.chat_text(prompt) if isinstance(prompt, list) else prompt
        trace = AttentionTrace.decoder_only(
            text=text, continuation=self.tokenizer.decode(new), ids=ids, tokens=tokens, output_ids=outputs,
            output_tokens=self.tokenizer.pieces(outputs), maps=attentions,
            mask=window_mask(n, 0, None, torch.device("cpu"))[0, 0].numpy(),
            positional=positional.float().cpu().numpy(),
            embeddings=self.network.token_embeddings(ids_tensor)[0].float().cpu().numpy(), steps=steps,
            log_probability=log_probability,
            settings={"search": "greedy" if forced_ids is None else "forced", "beam": 1, "top_k": top_k,
                      "max_new_tokens": max_new_tokens,
                      "prompt_length": len(prompt_ids), "kv_heads": self.network.layers[0].self_attn.query_kv_heads(),
                      "windows": [self.network.window(i) for i in range(len(self.network.layers))], **internals},
            config=self.config.to_dict(), model_name=self.name,
            device="CPU" if self.device.type == "cpu" else f"GPU: {torch.cuda.get_device_name(self.device)}",
            timings={"decode_ms": 1000 * (decoded - start), "trace_ms": 1000 * (time.perf_counter() - decoded),
                     "total_ms": 1000 * (time.perf_counter() - start)})
        trace.validate()
        return trace


def next_token_candidates(logits: Sequence[torch.Tensor], outputs: Sequence[int], top_k: int
                          ) -> tuple[list[float], list[list[int]], list[list[float]], list[float]]:
    """Per row of the calls' `logits` (each ``(rows, vocabulary)``, one under the other): the probability of its
    `outputs` token, its `top_k` candidates with theirs, and the token's log-probability (from the log-softmax: finite
    where the probability underflows float32); softmaxed `ROWS_AT_ONCE` rows at a time, so no ``(n, vocabulary)``
    probability tensor is ever held."""
    chosen, top_ids, top_probabilities, log_chosen = [], [], [], []
    for rows in (part for call in logits for part in call.split(ROWS_AT_ONCE)):
        rows = rows.float()
        probabilities = torch.softmax(rows, dim=-1)
        index = torch.as_tensor(outputs[len(chosen):len(chosen) + len(rows)], device=rows.device)
        chosen += probabilities.gather(1, index[:, None])[:, 0].tolist()
        log_chosen += (rows.gather(1, index[:, None])[:, 0] - torch.logsumexp(rows, dim=-1)).tolist()
        top = probabilities.topk(min(top_k, probabilities.shape[-1]), dim=-1)
        top_ids += top.indices.tolist()
        top_probabilities += top.values.tolist()
    return chosen, top_ids, top_probabilities, log_chosen


def recorded_internals(calls: list[CausalLMOutput]) -> dict[str, object]:
    """What a trace's settings keep of the calls beside their maps, where the model has it: each layer's learned sink
    logits (``sink_logits``: layers x heads) and where its mixture of experts sent each token (``routing``: the
    experts and their weights, layers x tokens x top k)."""
    found: dict[str, object] = {}
    if calls[0].sinks:
        found["sink_logits"] = [sinks.tolist() for sinks in calls[0].sinks]
    if calls[0].routing:
        found["routing"] = {part: [torch.cat([getattr(out.routing[layer], part)[0] for out in calls]).tolist()
                                   for layer in range(len(calls[0].routing))] for part in ("experts", "weights")}
    return found


def recorded_recipes(calls: list[CausalLMOutput]) -> OnDemandMaps:
    """Per layer, one recipe of the cached calls' (the prompt's, then one per new token): their maps made on
    demand."""
    return OnDemandMaps([merged([out.recipes[layer] for out in calls]) for layer in range(len(calls[0].recipes))])


def recorded_maps(calls: list[CausalLMOutput], n: int) -> list[np.ndarray]:
    """Per layer ``(heads, n, n)`` float32: the rows each cached call recorded (the prompt's, then one per new token)
    one under the other, the keys after a row's own (never attended) zero. Each call's maps are let go once copied
    (one call's: taken as they are, no copy)."""
    if len(calls) == 1:
        return [weights[0].float().cpu().numpy() for weights in calls[0].attentions]
    maps = [np.zeros((weights.shape[1], n, n), dtype=np.float32) for weights in calls[0].attentions]
    row = 0
    for out in calls:
        for layer, weights in zip(maps, out.attentions):
            weights = weights[0]
            layer[:, row:row + weights.shape[1], :weights.shape[2]] = weights.float().cpu().numpy()
        row += out.logits.shape[1]
        out.maps.clear()
    return maps
