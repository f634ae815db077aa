"""`TranslationModel`: a translator (encoder-decoder) model directory loaded: `translate` / `trace`.

It is also the one door of the layers above (analysis, attribution) to the search and the network: many sentences
as ids (`translate_ids`, `forced_passes`, `sequence_log_probs`) and worker processes (`worker_pool`).

A loaded `TranslationModel` is read-only at inference (weights come back from calls, nothing is stored on
modules), so one instance can serve many threads or browser sessions at once.
"""

from __future__ import annotations

import copy
import dataclasses
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

from ..config import ModelConfig
from ..data.batching import DEFAULT_BATCH_TOKENS, ForcedBatch
from ..data.typed_text import check_text
from ..modeldir.checkpoint import CheckpointError, load_model_dir, model_file, read_card
from ..modeldir.coverage import (
    TRAINING_STATS,
    InputAssessment,
    StatsError,
    TrainingStats,
    assess_input,
    load_training_stats,
)
from ..modeldir.languages import LanguagePair, LanguagesError, read_languages
from ..modeldir.training_facts import FactsError, TrainingFacts, load_training_facts
from ..nn.devices import device_label, resolve_device, threads
from ..nn.head_masked import HeadMaskedNetwork
from ..nn.lens_reading import LogitLens, check_lens, read_lens
from ..nn.model import HeadMask, Seq2SeqOutput, Transformer
from ..nn.quantize import LazyInt8Copy, rows_interact, search_network_for
from ..on_demand import check_maps, keeps_full_maps
from ..search import forced as forcing
from ..search import requests
from ..search.batched import translate_ids
from ..search.decoding import BeamTree, beam_search, beam_search_tree, output_limits
from ..search.next_token import draft_pays
from ..search.requests import Request, check_decoding, check_positions_flag
from ..search.settings import GenerationError, ModelGeneration, Search, export_generation, load_generation
from ..search.thread_choice import search_threads
from ..tokenization.imported import decoder_start
from ..tokenization.pretrained import M2M100Tokenizer
from ..tokenization.tokenizer import Tokenizer
from ..tokenization.tokenizer_json import JsonTokenizer
from ..trace import AttentionTrace
from ..workers import WorkerContext, start_worker
from .base import ModelKind

MANY_TO_MANY = (M2M100Tokenizer, JsonTokenizer)  # tokenizers whose target language can be chosen

MAX_BATCH = 10_000


def _with_config(network: Transformer, config: ModelConfig) -> Transformer:
    """A view of `network` (every module and parameter shared) with another config: decoding reads the config."""
    view = copy.copy(network)
    view.config = config
    return view


class TranslationModel(ModelKind):
    """A loaded model directory: the network, its tokenizer, config and card, on one device.

    :ivar network: the full-precision `Transformer`, in eval mode
    :ivar search_network: what beam search runs: the int8 copy (see `search_precision`), the packed full-precision
        copy (`viz_model.nn.packed`) or `network` itself
    :ivar tokenizer: the model's tokenizer (SentencePiece, or a Hugging Face model's)
    :ivar name: the model directory's name
    :ivar directory: the model directory, None for a model built in memory
    :ivar device: the torch device it runs on
    :ivar card: the model card (the directory's ``MODEL_CARD.md``), Markdown; "" when there is none
    :ivar generation: the model's default search rule and its transformers settings
    :ivar languages: the source and target language
    :ivar training_stats: piece counts and lengths of the training data (input checks), None when not known
    :ivar training_facts: how it was trained (``training_facts.json``), None when not known
    """

    kind = "translator"
    attention_kinds = ("encoder", "decoder", "cross")
    description = "a translator (encoder-decoder)"

    def __init__(self, network: Transformer, tokenizer: Tokenizer, name: str = "", directory: Path | None = None,
                 device: str | torch.device = "auto", card: str = "", training_stats: TrainingStats | None = None,
                 precision: str = "auto", languages: LanguagePair | None = None,
                 training_facts: TrainingFacts | None = None, generation: ModelGeneration | None = None) -> None:
        self.device = resolve_device(device)
        self.network = network.to(self.device).eval()
        # how it searches by default: this project's rule, or (an imported model) transformers' with its settings
        self.generation = generation or ModelGeneration("project", export_generation(network.config))
        # what beam search runs: int8 on the CPU by default for this project's models (see viz_model.nn.quantize), full
        # precision for a model that searches as transformers does (int8 can change its answer); traces are fp32
        if precision == "auto" and self.generation.rule == "transformers":
            precision = "fp32"
        # a full-precision search on the CPU runs on the packed copy (viz_model.nn.packed) where a step's weights fit
        # the caches; a larger model's is drafted in int8 and verified in one pass (draft_network): packing gains
        # nothing there (benchmarks/bench_peers.py at opus-mt's size) and would hold its matrices twice
        self.search_network = search_network_for(self.network, precision, packed=not draft_pays(self.network.config))
        self._draft = LazyInt8Copy()  # the int8 draft of full-precision searches, built on first use
        self.tokenizer = tokenizer
        self.name = name
        self.directory = directory
        self.card = card
        self.training_stats = training_stats
        self.languages = languages or LanguagePair()
        self.training_facts = training_facts  # how it was trained (training_facts.json), None when not known

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "auto", precision: str = "auto"
             ) -> TranslationModel:
        """The translator's model directory `directory` on `device`, beam search in `precision`; optional metadata
        (training statistics and facts) that is broken is warned about and left out; other errors name the file."""
        directory = Path(directory)
        network, tokenizer, _ = load_model_dir(directory)
        card = read_card(directory)
        try:
            stats = load_training_stats(directory)
        except StatsError as err:  # optional metadata: a broken file must not stop the model from serving
            warnings.warn(f"{err}; input checks against the training data are off", stacklevel=3)
            stats = None
        if stats is not None and len(stats.piece_counts) != tokenizer.vocab_size:
            warnings.warn(f"{directory / TRAINING_STATS}: {len(stats.piece_counts)} piece counts for a vocabulary of "
                          f"{tokenizer.vocab_size}; input checks against the training data are off", stacklevel=3)
            stats = None
        try:
            facts = load_training_facts(directory)
        except FactsError as err:  # optional metadata, like the statistics: said, then served without it
            warnings.warn(f"{err}; the training page cannot show this model's recipe", stacklevel=3)
            facts = None
        try:
            languages = read_languages(directory, lambda p: model_file(directory, p.name, 4096).read_text("utf-8"))
            generation = load_generation(directory, network.config)
        except (LanguagesError, GenerationError) as err:
            raise CheckpointError(str(err)) from None
        return cls(network, tokenizer, directory.name, directory, device, card, stats, precision, languages, facts,
                   generation)

    def with_precision(self, precision: str) -> TranslationModel:
        """The same model (network, tokenizer and card shared, not copied) searching in another precision ("auto",
        "int8" or "fp32"); itself when it searches in that precision already (no second copy of the network)."""
        if precision == self.search_precision:
            return self
        view = TranslationModel(self.network, self.tokenizer, self.name, self.directory, self.device, self.card,
                                self.training_stats, precision, self.languages, self.training_facts, self.generation)
        view._draft = self._draft  # one int8 draft per network, shared by every view
        return view

    def draft_network(self) -> Transformer | None:
        """The int8 copy that drafts a full-precision search of one sentence
        (`viz_model.search.next_token.verified_search`:
        the same decisions, a fraction of the passes over the weights), built on first use; None where it would
        not pay (a decoder whose weights a CPU cache holds: `draft_pays`), where the search is int8 itself, on a
        GPU, for weights other than float32 and without int8 kernels."""
        first = next(self.network.parameters())
        if rows_interact(self.search_network) or first.device.type != "cpu" or first.dtype != torch.float32 \
                or not draft_pays(self.config):
            return None
        draft = self._draft.get(self.network)  # shared by the views: with this view's config (target, start)
        return draft if draft is None or draft.config == self.config else _with_config(draft, self.config)

    def search_threads(self) -> int:
        """The CPU threads this model's traces run on here: the fastest of a short calibration among the counts whose
        encoding and search logits are the same and whose maps are within 1e-6 (`viz_model.search.thread_choice`),
        kept for this process's life."""
        return search_threads(self.search_network, self.recording_network)

    def search_settings(self, rule: str | None = None, beam: int | None = None, alpha: float | None = None
                        ) -> Search:
        """The settings of one search, checked: `rule` "project" or "transformers" (default: the model's own),
        `beam` and `alpha` (default: the rule's: beam 4 and alpha 0.6 by this project's rule, the generation
        config's num_beams and length_penalty by transformers')."""
        return requests.search_settings(self.generation, rule, beam, alpha)

    @property
    def imported(self) -> bool:
        """Whether the model came from another framework (`viz-model import`): its tokenizer is a Hugging Face
        one, its training is documented by its source (its card names it), not by this project."""
        return not isinstance(self.tokenizer, Tokenizer)

    @property
    def target_languages(self) -> list[str]:
        """The language codes this model can translate into on request (an M2M100, NLLB or mBART model's), else
        []."""
        return list(self.tokenizer.codes) if isinstance(self.tokenizer, MANY_TO_MANY) else []

    def with_target_language(self, code: str) -> TranslationModel:
        """This model translating into `code` (one of `target_languages`): its first output is forced to that
        language's code, or (the original mBART) its decoding starts from it. Weights, the search network and the card
        are shared, not copied."""
        if not self.target_languages:
            raise ValueError(f"{self.name or 'this model'} translates one language pair ({self.languages.label}); "
                             "only a many-to-many model (M2M100, NLLB, mBART) takes a target language")
        if code not in self.target_languages:
            raise ValueError(f"{code!r} is not one of this model's target languages "
                             f"({', '.join(self.target_languages)})")
        assert isinstance(self.tokenizer, MANY_TO_MANY)
        if code == self.tokenizer.target_language:
            return self
        tokenizer = self.tokenizer.for_target(code)
        config = dataclasses.replace(self.config, forced_first_id=tokenizer.target_code,
                                     bos_id=decoder_start(tokenizer, self.config.bos_id))
        view = copy.copy(self)
        view.network, view.tokenizer = _with_config(self.network, config), tokenizer
        view.search_network = (view.network if self.search_network is self.network
                               else _with_config(self.search_network, config))
        view.languages = LanguagePair(self.languages.source, code)
        return view

    @property
    def task_prefix(self) -> str | None:
        """The text put before every source of a model that reads its task from the text (T5's family: e.g.
        "translate English to German: ", "" for one imported without a task, such as Flan-T5); None for any other
        model."""
        tokenizer = self.tokenizer
        return tokenizer.rules["text_prefix"] if isinstance(tokenizer, JsonTokenizer) and \
            tokenizer.reads_task_prefix else None

    def with_task_prefix(self, prefix: str) -> TranslationModel:
        """This model putting `prefix` before every source ("": the text as given), as transformers' translation
        pipeline put a T5 model's own; the prefix's pieces show among the source tokens. Weights, the search network
        and the card are shared, not copied."""
        if self.task_prefix is None:
            raise ValueError(f"{self.name or 'this model'} reads no task from its text: only a T5-family model takes "
                             "a task prefix")
        if requests.check_task_prefix(prefix) == self.task_prefix:
            return self
        view = copy.copy(self)
        assert isinstance(self.tokenizer, JsonTokenizer)
        view.tokenizer = self.tokenizer.with_text_prefix(prefix)
        return view

    @property
    def device_label(self) -> str:
        """'CPU' or ``GPU: <its name>``."""
        return device_label(self.device)

    @property
    def search_precision(self) -> str:
        """'int8' when beam search runs the int8 copy of the decoder (see `viz_model.nn.quantize`), else 'fp32' (the
        network itself, or its packed copy: `viz_model.nn.packed`)."""
        return "int8" if rows_interact(self.search_network) else "fp32"

    @property
    def recording_network(self) -> Transformer:
        """What the recorded passes of `trace` run: the packed full-precision copy where beam search runs one (the
        network's numbers: see `viz_model.nn.packed`), else `network` itself."""
        return self.network if rows_interact(self.search_network) else self.search_network

    def encode(self, text: str, truncate: bool = False, what: str = "text") -> list[int]:
        """Source ids (pieces + ``</s>``, and the source language's code after it where the tokenizer puts it there:
        the original mBART's); too long is a `TooLong` naming the limit, unless `truncate` (the pieces are cut, the
        end kept); `what` names the text in errors."""
        return requests.source_ids(self.tokenizer, self.config, text, truncate, what)

    def request(self, text: str, target: str | None = None, truncate: bool = False,
                names: tuple[str, str] = ("text", "target")) -> Request:
        """The one check of a translation request (`trace` and the app call it): both texts are text, and fit the
        model; errors are `ValueError`s that say why (`TooLong` for a length), naming the texts by `names`."""
        return requests.request(self.tokenizer, self.config, text, target, truncate, names)

    def assess(self, text: str) -> InputAssessment:
        """How far `text` is from the training data: unknown characters, rare pieces, unseen length."""
        return assess_input(self.tokenizer, check_text(text), self.training_stats)

    def translate(self, texts: str | list[str], beam: int | None = None, alpha: float | None = None,
                  truncate: bool = False, rule: str | None = None) -> str | list[str]:
        """Translate one sentence (returns a string) or a list (returns a list): batched by length with a
        full-precision search; with the int8 search one sentence at a time (see `viz_model.nn.quantize.rows_interact`).
        `rule`, `beam`, `alpha`: see `search_settings` (default: the model's own search).
        """
        search = self.search_settings(rule, beam, alpha)
        single = isinstance(texts, str)
        if not single and not isinstance(texts, (list, tuple)):
            raise ValueError(f"texts must be a string or a list of strings, got {type(texts).__name__}")
        batch = [texts] if single else list(texts)
        if len(batch) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} sentences per call, got {len(batch)}")
        sources = [self.encode(t, truncate) for t in batch]
        hyps = translate_ids(self.search_network, sources, search.beam, search.alpha, device=self.device,
                             hf=search.hf, draft=self.draft_network())
        out = [self.tokenizer.decode(h.tokens) for h in hyps]
        return out[0] if single else out

    def trace(self, text: str, beam: int | None = None, alpha: float | None = None, target: str | None = None,
              top_k: int = 5, truncate: bool = False, head_mask: HeadMask | None = None, positions: bool = True,
              forced_ids: list[int] | None = None, rule: str | None = None, maps: str = "full") -> AttentionTrace:
        """Translate `text` (or force `target`) and record every attention map, mask, encoding and step.

        `forced_ids` forces output piece ids instead of a text (e.g. another trace's ``output_ids``: re-encoding
        decoded text need not give the same pieces). ``positions=False`` runs the whole translation (search and
        trace) without positional encodings, an experiment on what word order is worth; the trace's
        ``*_positional`` arrays are then zeros. `rule`, `beam`, `alpha`: the search (see `search_settings`);
        the trace's settings record them. `maps`: "full" (the default: a sentence's maps are small, and the
        threshold's benchmark measured language models) keeps every map, "on_demand" each layer's recipe (a map
        made when read: `OnDemandMaps`), "auto" every map where neither source nor output passes
        `FULL_MAPS_MAX_TOKENS` tokens.
        """
        search = self.search_settings(rule, beam, alpha)
        beam, alpha, top_k = check_decoding(search.beam, search.alpha, top_k, search.rule)
        check_positions_flag(positions)
        check_maps(maps)
        started = time.perf_counter()
        if target is not None and forced_ids is not None:
            raise ValueError("give the forced output as target text or as forced_ids, not both")
        checked = self.request(text, target, truncate)
        src = torch.tensor([checked.source_ids], device=self.device)
        # the calibrated threads (the same decisions, maps within 1e-6: `search_threads`) where the search steps on its
        # own; a verified draft decides on the full-precision passes: only its draft's steps take the draft's
        draft = self.draft_network() if target is None and forced_ids is None else None
        with torch.inference_mode(), threads(self.search_threads() if draft is None else torch.get_num_threads()):
            # one encoder pass serves the search and the trace (the int8 search network shares the encoder, and the
            # search encodes with need_weights=True too: the same numbers as searching from scratch)
            net = self.recording_network
            encoded = net.encode(src, need_weights=True, head_mask=head_mask, positions=positions)
            forced = target is not None or forced_ids is not None
            raw_logits: torch.Tensor | None = None  # a verified search's logits of the output: not projected again
            if forced_ids is not None:
                output_ids = requests.forced_output_ids(self.config, forced_ids)
                max_len = self.config.max_positions
            elif target is None:
                max_len = output_limits(src, self.network, search.hf)[0]
                best = beam_search(self.search_network, src, beam, alpha, None if search.hf else [max_len],
                                   positions=positions, encoded=encoded if head_mask is None else None, hf=search.hf,
                                   draft=draft, draft_threads=None if draft is None else search_threads(draft),
                                   step_logits=head_mask is None and self.search_network is net)[0]
                output_ids = best.tokens
                raw_logits = None if best.step_logits is None else best.step_logits[None]
            else:
                assert checked.forced_ids is not None
                output_ids, max_len = checked.forced_ids, self.config.max_positions
            decoded = time.perf_counter()
            target_ids = [self.config.bos_id] + output_ids[:-1]
            tgt = torch.tensor([target_ids], device=self.device)
            # on demand: its own encoder pass (the search's, need_weights=True, holds maps, not recipes)
            if not keeps_full_maps(maps, max(len(checked.source_ids), len(target_ids))):
                out = net(src, tgt, need_weights="recipe", head_mask=head_mask, positions=positions,
                          raw_logits=raw_logits)
            else:
                out = net(src, tgt, need_weights=True, head_mask=head_mask, positions=positions, encoded=encoded,
                          raw_logits=raw_logits)
            settings = {"beam": beam, "alpha": alpha, "top_k": top_k, "forced": forced, "max_output_length": max_len,
                        "head_mask": head_mask is not None, "positions": positions,
                        "search": "forced" if forced else self.search_precision,
                        "rule": "forced" if forced else search.rule}
            trace = AttentionTrace.recorded(net, self.tokenizer, text, src, tgt, output_ids, out, top_k, positions,
                                            settings, self.name, self.device_label)
        finished = time.perf_counter()
        trace.timings = {"decode_ms": round((decoded - started) * 1000, 2),
                         "trace_ms": round((finished - decoded) * 1000, 2),
                         "total_ms": round((finished - started) * 1000, 2)}
        return trace

    @torch.inference_mode()
    def logit_lens(self, text: str, /, top_k: int = 5, *, track: Sequence[int] = (), target: str | None = None,
                   forced_ids: list[int] | None = None) -> LogitLens:
        """The logit lens of the decoder reading `text`'s encoding and its own translation (`target` or
        `forced_ids`: this output instead): the decoder's embeddings and its residual stream after each layer, read
        through its final norm and output projection; the last row is the model's own output. Positions are the
        decoder's input (the start token, then the output but its last token)."""
        top_k, track = check_lens(top_k, track, self.config.vocab_size)
        if target is not None and forced_ids is not None:
            raise ValueError("give the forced output as target text or as forced_ids, not both")
        checked = self.request(text, target)
        if forced_ids is not None:
            output_ids = requests.forced_output_ids(self.config, forced_ids)
        else:
            output_ids = checked.forced_ids or self.translate_ids([checked.source_ids])[0]
        target_ids = [self.config.bos_id] + output_ids[:-1]
        encoded = self.network.encode(torch.tensor([checked.source_ids], device=self.device))
        decoded = self.network.decode(torch.tensor([target_ids], device=self.device), encoded, states=True)
        return read_lens(target_ids, decoded.states, self.network.unembed, top_k, track, self.pieces)

    def beam_tree(self, text: str, beam: int | None = None, alpha: float | None = None, truncate: bool = False,
                  positions: bool = True, rule: str | None = None) -> BeamTree:
        """The beam search of `text` recorded step by step (see `viz_model.search.decoding.beam_search_tree`); its
        ``best`` is the hypothesis `translate` / `trace` return with the same settings."""
        search = self.search_settings(rule, beam, alpha)
        check_positions_flag(positions)
        src = torch.tensor([self.encode(text, truncate)], device=self.device)
        with torch.inference_mode():
            return beam_search_tree(self.search_network, src, search.beam, search.alpha, positions=positions,
                                    hf=search.hf, draft=self.draft_network())

    # --- the door of the layers above (analysis, attribution): many sentences as ids --------------------------------
    def translate_ids(self, sources: Sequence[Sequence[int]], search: Search | None = None, *,
                      head_mask: HeadMask | None = None, progress: Callable[[int], object] | None = None
                      ) -> list[list[int]]:
        """Each source's output ids, searched by `search` (default the model's own: `search_settings`) in batches of
        like length, without `translate`'s int8 draft; `head_mask` switches heads off, `progress` gets batch sizes."""
        search = self.search_settings() if search is None else search
        network = self.search_network if head_mask is None else HeadMaskedNetwork(self.search_network, head_mask)
        hyps = translate_ids(network, [list(s) for s in sources], search.beam, search.alpha, device=self.device,
                             progress=progress, hf=search.hf)
        return [h.tokens for h in hyps]

    def forced_passes(self, sources: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                      batch_tokens: int = DEFAULT_BATCH_TOKENS, *, head_mask: HeadMask | None = None,
                      need_weights: bool = False) -> Iterator[tuple[ForcedBatch, Seq2SeqOutput]]:
        """Each length-grouped batch of (source ids, output ids) pairs with the full-precision network's teacher-forced
        output (`need_weights`: with every attention record); under torchrun this process's share of the batches."""
        yield from forcing.forced_passes(self.network, sources, outputs, batch_tokens, head_mask, need_weights)

    def sequence_log_probs(self, sources: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                           head_mask: HeadMask | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS
                           ) -> np.ndarray:
        """``log P(output | source)`` of each (source ids, output ids) pair under the full-precision network,
        teacher-forced in length-grouped batches, in input order."""
        return forcing.sequence_log_probs(self.network, sources, outputs, head_mask, batch_tokens)

    def embeddings(self, ids: Sequence[int]) -> torch.Tensor:
        """``(1, len, d_model)`` the token embeddings of source ids, before the encoder adds their positions."""
        return self.network.token_embeddings(torch.tensor([list(ids)], device=self.device), "source")

    def worker_pool(self, workers: int) -> ProcessPoolExecutor:
        """`workers` processes, started now, each loading this model from its `directory` on the CPU with its share
        of this process's threads; a task gets its process's model from `worker_model`."""
        if self.directory is None:
            raise ValueError(f"{self.name or 'this model'} has no directory for worker processes to load it from")
        pool = ProcessPoolExecutor(workers, mp_context=WorkerContext(), initializer=start_worker,
                                   initargs=(TranslationModel.load, str(self.directory),
                                             max(1, torch.get_num_threads() // workers)))
        pool.submit(int)  # start them now (an executor starts its processes with the first task)
        return pool
