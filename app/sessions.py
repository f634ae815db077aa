"""The model and its results shared by every page: the `ModelRef` the caches key on, cached loading (one model per
directory version per process), cached traces, beam trees, layer scores and attributions, and the `Session` of one
browser tab."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

import viz_model
from viz_model import EncoderModel, LanguageModel
from viz_model.analysis.checkpoint_scores import CheckpointScores, series_scores
from viz_model.analysis.layer_scores import LayerScores, layer_scores
from viz_model.analysis.memory_estimate import TracePlan
from viz_model.attribution import Attribution, attribute_ids
from viz_model.attribution.faithfulness import deletion_scores
from viz_model.attribution.gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE
from viz_model.kinds.translator import TranslationModel
from viz_model.lessons import hand_attention
from viz_model.lessons.encoder_masks import PaddedBatch, padded_batch
from viz_model.lessons.encoder_positions import DisentangledSplit, disentangled_split
from viz_model.lessons.position_parts import ScoreSplit, split_scores
from viz_model.modeldir.checkpoint import CONFIG, TOKENIZER, WEIGHTS, CheckpointError, model_kind
from viz_model.modeldir.coverage import TRAINING_STATS
from viz_model.modeldir.languages import name as language_name
from viz_model.modeldir.languages import read_languages
from viz_model.modeldir.series import Series, available_series, folder_series
from viz_model.modeldir.shipped import asset_roots, model_root
from viz_model.nn.devices import device_from_env, give_back_memory
from viz_model.on_demand import OnDemandMaps
from viz_model.search.decoding import BeamTree
from viz_model.trace import AttentionTrace
from viz_model.training_series import check_same_model, load_step
from viz_model.translation_tasks import translation_tasks, with_translation_task

LANGUAGE_MODEL = "language model"  # what the model picker says of a decoder-only model directory
ENCODER = "encoder"  # and of an encoder-only one
TRACE_CACHE_ENTRIES = 12
TRAINING_SLOTS = 2  # synthetic trainings (Learn: watch attention form) the server runs at once, for every session
TRAINING_BUSY = (f"The server is already training {TRAINING_SLOTS} models for other visitors; try again in a "
                 "moment.")  # what a page says when every training slot is taken
_TRAINING = threading.BoundedSemaphore(TRAINING_SLOTS)
TRACE_CACHE_BYTES = 400 * 2**20  # what the traces of every session may hold together


# --- models and traces -------------------------------------------------------------------------------------------
def roots_label() -> str:
    """The folders models are found in, for messages."""
    return os.pathsep.join(str(root) for root in asset_roots())


def model_names() -> list[str]:
    """Every model directory of every folder of `asset_roots` (VIZ_MODEL_ASSETS), the default model first."""
    return viz_model.available_models()


def picker_names() -> list[str]:
    """What the model picker offers: every model directory (`model_names`), then every checkpoint series folder of
    another name (`series_folders`)."""
    names = model_names()
    return names + [name for name in series_folders() if name not in names]


def series_folders() -> dict[str, Path]:
    """Every checkpoint series folder of every folder of `asset_roots` (a model across its training), by name: its
    root."""
    return available_series(asset_roots())


@st.cache_data(show_spinner=False, max_entries=4)
def compute_series_scores(folder: str, stamp: str) -> dict[int, CheckpointScores]:
    """`series_scores` of the series folder `folder` on this process's device (`stamp`: its steps' files, so that
    a series that grew is measured again); one line where its steps are no one model."""
    return series_scores(folder_series(Path(folder)), device_from_env())


HUB_SERIES = "_sidebar_hub_series"  # the hub id's series the sidebar opened in this tab (a `Series`), else absent


def open_hub_series() -> Series | None:
    """The hub id's series the sidebar opened in this browser tab (None: none is open)."""
    return st.session_state.get(HUB_SERIES)


@st.cache_data(show_spinner=False, max_entries=4)
def compute_hub_series_scores(source: str, steps: tuple[int, ...], places: tuple[str, ...]
                              ) -> dict[int, CheckpointScores]:
    """`series_scores` of the hub id `source`'s series (`places`: the revisions of its `steps`) on this process's
    device; one line where a revision is missing or its steps are no one model."""
    return series_scores(Series(source, steps, places), device_from_env())


def series_stamp(folder: Path) -> str:
    """The steps of a series folder and the `model_stamp` of each: a changed series gets a fresh cache entry."""
    series = folder_series(folder)
    return ";".join(f"{step}={model_stamp(Path(place).parent, Path(place).name)}"
                    for step, place in zip(series.steps, series.places))


def root_of(name: str) -> Path:
    """The folder model `name` is found in (the first folder when no folder has it: loading then says so)."""
    return model_root(name) or asset_roots()[0]


HUB_ROOT = ""  # the root of a hub id's revision: fetched from the hub, not found in a models folder
STAMPED_FILES = (WEIGHTS, CONFIG, TOKENIZER, TRAINING_STATS)


def model_stamp(root: Path, name: str) -> str:
    """Size and modification time of each file a model loads: a changed model directory gets a fresh cache entry."""
    parts = []
    for file in STAMPED_FILES:
        try:
            info = (root / name / file).stat()
            parts.append(f"{info.st_size}:{info.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


@dataclass(frozen=True)
class ModelRef:
    """A model as the caches key it: its folder, directory name and files' `model_stamp`, the precision its search
    runs in, the target language of a many-to-many model or of a T5's translation task ("" = its own), the task
    prefix of a T5-family model (None = its own) and, for a checkpoint series `name`, the revision: the folder of
    the step open ("" = none: a model directory); for a hub id's series (root `HUB_ROOT`), the hub revision of the
    step open and that `step`."""

    root: str
    name: str
    stamp: str
    precision: str = "auto"
    lang: str = ""
    prefix: str | None = None
    revision: str = ""
    step: int | None = None

    @classmethod
    def hub(cls, series: Series, step: int) -> ModelRef:
        """Step `step` of the hub id's series `series`: its revision of the hub id (fetched and cached on first use)."""
        return cls(HUB_ROOT, series.source, "", revision=series.place(step), step=step)

    @classmethod
    def of(cls, name: str, revision: str = "") -> ModelRef:
        """Model `name` (at `revision`, a step's folder of the series `name`) as its folder holds it now."""
        if revision:
            root = series_folders().get(name, root_of(name))
            return cls(str(root), name, model_stamp(root / name, revision), revision=revision)
        root = root_of(name)
        return cls(str(root), name, model_stamp(root, name))

    @property
    def directory(self) -> Path:
        return Path(self.root) / self.name / self.revision if self.revision else Path(self.root) / self.name

    @property
    def stored(self) -> ModelRef:
        """The directory version alone (what loading depends on): auto search, the model's own language and task."""
        return replace(self, precision="auto", lang="", prefix=None)

    def searching(self, precision: str, lang: str = "", prefix: str | None = None) -> ModelRef:
        return replace(self, precision=precision, lang=lang, prefix=prefix)


def load_model(ref: ModelRef) -> TranslationModel | LanguageModel | EncoderModel:
    """The model of `ref`'s directory version, loaded once per process and shared by every session."""
    return _load_model(ref.stored)


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def _load_model(ref: ModelRef) -> TranslationModel | LanguageModel | EncoderModel:
    if ref.root == HUB_ROOT and ref.step is not None:  # a hub id at one step's revision
        return load_step(Series(ref.name, (ref.step,), (ref.revision,)), ref.step, device_from_env())
    if ref.revision:
        return _load_step(ref)
    if ref.name not in viz_model.available_models(ref.root):  # only ever a real directory directly under the root
        raise CheckpointError(f"no model directory named {ref.name!r} in {ref.root}")
    return viz_model.load(ref.directory, device=device_from_env())


def _load_step(ref: ModelRef) -> LanguageModel:
    """The step `ref.revision` of the series `ref.name` (only ever a step folder the series names), checked to be
    the same model as the series' first step (one line otherwise)."""
    if ref.name not in available_series([Path(ref.root)]):
        raise CheckpointError(f"no checkpoint series named {ref.name!r} in {ref.root}")
    series = folder_series(Path(ref.root) / ref.name)
    steps = {Path(place).name: step for step, place in zip(series.steps, series.places)}
    if ref.revision not in steps:
        raise CheckpointError(f"the series {ref.name!r} has no checkpoint folder {ref.revision!r}")
    model = load_step(series, steps[ref.revision], device_from_env())
    first = Path(series.places[0]).name
    if ref.revision != first:
        check_same_model(load_model(ModelRef.of(ref.name, first)), model, series.steps[0], steps[ref.revision])
    return model


def load_hub_step(series: Series, step: int) -> LanguageModel:
    """Step `step` of the hub id's series `series` (`load_model`, cached), checked to be the same model as the series'
    first step (one line otherwise)."""
    model = load_model(ModelRef.hub(series, step))
    if step != series.steps[0]:
        check_same_model(load_model(ModelRef.hub(series, series.steps[0])), model, series.steps[0], step)
    return model


def load_translator(ref: ModelRef) -> TranslationModel:
    """`load_model(ref)` where it is a translator; a model of another kind (a language model, an encoder) refused in
    one line naming its kind."""
    model = load_model(ref)
    if "cross" not in model.attention_kinds:  # no source read by an encoder and a translation that reads it
        raise ValueError(f"{ref.name} is {model.description}, not a translation model")
    return model  # type: ignore[return-value]


@st.cache_resource(show_spinner="Preparing the search…", max_entries=8)
def searching_model(ref: ModelRef) -> TranslationModel:
    """The cached model searching in precision `ref.precision`, into target language `ref.lang` for a many-to-many
    model (a T5 that lists several: its translation task into it), with task prefix `ref.prefix` for a T5-family one
    (the network is shared with `load_model`'s, not copied; a model that is no translator is refused in one line)."""
    model = load_translator(ref)
    model = model if ref.precision == "auto" else model.with_precision(ref.precision)
    if ref.lang:  # a T5's translation task into that language, else a many-to-many model's target language
        model = with_translation_task(model, ref.lang) if translation_tasks(model) else \
            model.with_target_language(ref.lang)
    return model if ref.prefix is None else model.with_task_prefix(ref.prefix)


def matching_target(model: TranslationModel, wanted: str) -> str:
    """The code of `model`'s target language that `wanted` names, a code of any family (de, de_DE and deu_Latn are
    all German; where several name it, as zho_Hans and zho_Hant, the model's own, else the first in order); "" where
    that is the model's own target, or not one it can translate into."""
    codes, own = [t.target for t in translation_tasks(model)] or model.target_languages, model.languages.target
    if wanted != own and language_name(wanted) == language_name(own) and wanted not in codes:
        return ""
    named = [wanted] if wanted in codes else sorted(c for c in codes if language_name(c) == language_name(wanted))
    return named[0] if named and named[0] != own else ""


def python_bytes(value: object, seen: set[int] | None = None) -> int:
    """Bytes of `value` as Python objects: itself, and the items, fields and strings it holds (each object once)."""
    seen = set() if seen is None else seen
    if id(value) in seen or isinstance(value, (np.ndarray, OnDemandMaps)):
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        return size + sum(python_bytes(k, seen) + python_bytes(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return size + sum(python_bytes(item, seen) for item in value)
    if dataclasses.is_dataclass(value):
        return size + sum(python_bytes(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    return size


def held_bytes(trace: AttentionTrace) -> int:
    """What a trace holds: its arrays' bytes, its recipes' where its maps are made on demand (`trace.nbytes`), and
    its Python objects (steps, tokens, settings: about 1 kB a token)."""
    return trace.nbytes + python_bytes(trace)


class TraceCache:
    """Traces by request, shared by every session, the least recently used out first once there are more than
    `entries` or they hold more than `max_bytes` (a trace of the default model is ~0.2 MB, one of an imported
    opus-mt-size model up to ~150 MB), each counted by `held_bytes`. Thread-safe; the traces are frozen (read-only
    arrays), not copied. Memory a let-go trace held is handed back to the system (`give_back_memory`)."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self.entries, self.max_bytes = entries, max_bytes
        self._traces: OrderedDict[tuple, tuple[AttentionTrace, int, str | None]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._bytes()

    def _bytes(self) -> int:
        return sum(size for _, size, _ in self._traces.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._traces)

    def get(self, key: tuple, compute: Callable[[], AttentionTrace],
            check: Callable[[], str] | None = None) -> AttentionTrace:
        """The cached trace of `key`, or `compute()`'s, kept (the newest is always kept, however large). On a miss
        `check()` runs first: it may refuse (raise) before anything is computed; its line is the trace's `note`."""
        with self._lock:
            if key in self._traces:
                self._traces.move_to_end(key)
                return self._traces[key][0]
        note = check() if check is not None else None
        trace = compute().freeze()
        size = held_bytes(trace)
        with self._lock:
            self._traces[key] = (trace, size, note)
            self._traces.move_to_end(key)
            evicted = 0
            while len(self._traces) > 1 and (len(self._traces) > self.entries or self._bytes() > self.max_bytes):
                self._traces.popitem(last=False)
                evicted += 1
        if evicted:
            give_back_memory()  # the let-go traces' memory back to the system, not kept at the peak
        return trace

    def note(self, trace: AttentionTrace) -> str | None:
        """What the check said when `trace` was computed (None: no check, or no longer held)."""
        with self._lock:
            return next((note for kept, _, note in self._traces.values() if kept is trace), None)


@st.cache_resource(max_entries=1)
def trace_cache() -> TraceCache:
    """The process's one trace cache."""
    return TraceCache(TRACE_CACHE_ENTRIES, TRACE_CACHE_BYTES)


def compute_trace(ref: ModelRef, text: str, beam: int, alpha: float, target: str | None, top_k: int, truncate: bool,
                  positions: bool = True, rule: str | None = None) -> AttentionTrace:
    """The trace of this request, from the shared `TraceCache` (bounded in entries and bytes)."""
    key = (ref, rule, text, beam, alpha, target, top_k, truncate, positions)
    return trace_cache().get(key, lambda: searching_model(ref).trace(
        text, beam=beam, alpha=alpha, target=target, top_k=top_k, truncate=truncate, positions=positions, rule=rule))


def planned_trace(key: tuple, trace: Callable[[str], AttentionTrace],
                  plan: Callable[[], TracePlan] | None = None) -> AttentionTrace:
    """The cached trace of `key`, or on a miss `trace(maps)`, its maps kept as `plan()` decided before it from the
    library's memory estimate (`memory_estimate.plan_trace`: it may refuse; its line is the trace's note), "auto"
    without a plan."""
    made: list[TracePlan] = []

    def check() -> str:
        made.append(plan())
        return made[0].note
    return trace_cache().get(key, lambda: trace(made[0].maps if made else "auto"), None if plan is None else check)


def compute_completion(ref: ModelRef, prompt: str, max_new_tokens: int, top_k: int,
                       plan: Callable[[], TracePlan] | None = None) -> AttentionTrace:
    """A language model's trace of `prompt` and its greedy continuation, from the shared `TraceCache` (`plan`: see
    `planned_trace`)."""
    key = (ref.stored, "complete", prompt, max_new_tokens, top_k)
    return planned_trace(key, lambda maps: load_model(ref).trace(prompt, max_new_tokens, top_k, maps=maps), plan)


def compute_reading(ref: ModelRef, text: str, text_pair: str | None, top_k: int) -> AttentionTrace:
    """An encoder's trace of `text` (and `text_pair`) with its `top_k` predictions at each mask token, from the shared
    `TraceCache`."""
    key = (ref.stored, "read", text, text_pair, top_k)
    return trace_cache().get(key, lambda: load_model(ref).trace(text, text_pair, top_k=top_k))


@st.cache_data(show_spinner=False, max_entries=8)
def compute_padded_batch(ref: ModelRef, texts: tuple[str, ...], pairs: tuple[str | None, ...]) -> PaddedBatch:
    """An encoder's batch of `texts` (with their second sentences `pairs`), padded and read in one pass with the
    padding mask (`padded_batch`)."""
    return padded_batch(load_model(ref), texts, pairs)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_disentangled_split(ref: ModelRef, text: str, text_pair: str | None, layer: int,
                               head: int) -> DisentangledSplit:
    """A DeBERTa head's scores on a text split into its three terms (`disentangled_split`)."""
    return disentangled_split(load_model(ref), text, text_pair, layer, head)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_beam_tree(ref: ModelRef, text: str, beam: int, alpha: float, truncate: bool,
                      rule: str | None = None) -> BeamTree:
    return searching_model(ref).beam_tree(text, beam=beam, alpha=alpha, truncate=truncate, rule=rule)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_layer_scores(ref: ModelRef, sources: tuple[tuple[int, ...], ...], targets: tuple[tuple[int, ...], ...],
                         kind: str, layer: int) -> LayerScores:
    model = load_model(ref)
    return layer_scores(model.network, [list(s) for s in sources], kind, layer, [list(t) for t in targets])


@st.cache_data(show_spinner=False, max_entries=8)
def compute_score_split(ref: ModelRef, source_ids: tuple[int, ...], target_ids: tuple[int, ...], stack: str,
                        layer: int, head: int) -> ScoreSplit:
    """One head's scores on a sentence split into content and position (see `position_schemes.split_scores`)."""
    return split_scores(load_model(ref).network, list(source_ids), list(target_ids), stack, layer, head)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_attribution(ref: ModelRef, source_ids: tuple[int, ...], output_ids: tuple[int, ...],
                        methods: tuple[str, ...], steps: int, foil: int | None,
                        tolerance: float = DEFAULT_TOLERANCE) -> Attribution:
    model = load_model(ref)
    result = attribute_ids(model.network, list(source_ids), list(output_ids), methods, steps, foil,
                           model.tokenizer.pieces, tolerance)
    result.model_name = ref.name
    return result


@st.cache_data(show_spinner=False, max_entries=8)
def compute_deletions(ref: ModelRef, source_ids: tuple[int, ...], output_ids: tuple[int, ...],
                      methods: tuple[str, ...], ranked: tuple[str, ...], ks: tuple[int, ...], steps: int,
                      tolerance: float = DEFAULT_TOLERANCE) -> pd.DataFrame:
    """The deletion scores of the `ranked` source rankings (from an attribution of `methods`)."""
    model = load_model(ref)
    result = compute_attribution(ref, source_ids, output_ids, methods, steps, None, tolerance)
    return deletion_scores(model.network, list(source_ids), list(output_ids),
                           {m: result.source_scores(m) for m in ranked}, ks)


@st.cache_data(show_spinner="Sampling random queries and keys…", max_entries=8)
def compute_saturation(dims: tuple[int, ...], keys: int, samples: int, seed: int) -> pd.DataFrame:
    """How the softmax of random scores saturates with d_k (the Attention by hand page)."""
    return hand_attention.saturation(dims, keys, samples, seed)


@dataclass
class Session:
    """The loaded model (a translation model, a language model or an encoder) and the decoding settings chosen in the
    sidebar."""

    model: TranslationModel | LanguageModel | EncoderModel
    ref: ModelRef  # the model as the caches key it, searching as the sidebar says
    beam: int
    alpha: float
    top_k: int
    truncate: bool
    rule: str | None = None  # "project" or "transformers" (None: the model's own)

    @property
    def name(self) -> str:
        return self.ref.name

    def completion(self, prompt: str, max_new_tokens: int, plan: Callable[[], TracePlan] | None = None
                   ) -> AttentionTrace:
        """A language model's trace of `prompt` and its greedy continuation of `max_new_tokens`, cached (`plan`:
        see `planned_trace`)."""
        return compute_completion(self.ref, prompt, max_new_tokens, self.top_k, plan)

    def encoder_trace(self, text: str, text_pair: str | None = None) -> AttentionTrace:
        """An encoder's trace of `text` (and `text_pair`) and its top-k predictions at each mask token, cached."""
        return compute_reading(self.ref, text, text_pair, self.top_k)

    def padded_batch(self, texts: list[str], pairs: list[str | None]) -> PaddedBatch:
        """An encoder's batch of `texts` (with their second sentences `pairs`), padded and read in one pass with the
        padding mask, cached."""
        return compute_padded_batch(self.ref.stored, tuple(texts), tuple(pairs))

    def disentangled_split(self, text: str, text_pair: str | None, layer: int, head: int) -> DisentangledSplit:
        """A DeBERTa head's scores on `text` (and `text_pair`) split into its three terms, cached."""
        return compute_disentangled_split(self.ref.stored, text, text_pair, layer, head)

    def trace(self, text: str, target: str | None = None, positions: bool = True) -> AttentionTrace:
        return compute_trace(self.ref, text, self.beam, self.alpha, target or None, self.top_k, self.truncate,
                             positions, self.rule)

    def trace_of_model(self, name: str, text: str, target: str | None) -> tuple[AttentionTrace, str]:
        """`text` traced by the model `name` of the same assets folders, with this session's decoding settings and
        search precision, into this session's target language where that model has it (`matching_target`), else
        its own; returns the trace and the target language's code (a model that cannot load raises here, with its
        message, a model that is no translator in one line)."""
        other = load_translator(ModelRef.of(name))
        lang = matching_target(other, self.model.languages.target)
        ref = ModelRef.of(name).searching(self.ref.precision, lang)
        trace = compute_trace(ref, text, self.beam, self.alpha, target or None, self.top_k, self.truncate,
                              rule=self.rule)
        return trace, lang or other.languages.target

    def beam_tree(self, text: str, beam: int, alpha: float) -> BeamTree:
        """The recorded beam search of `text` (see `viz_model.search.decoding.beam_search_tree`), cached."""
        return compute_beam_tree(self.ref, text, beam, alpha, self.truncate, self.rule)

    def attribution(self, trace: AttentionTrace, methods: tuple[str, ...], steps: int = DEFAULT_STEPS,
                    foil: int | None = None, tolerance: float = DEFAULT_TOLERANCE) -> Attribution:
        """Attributions of the trace's translation (teacher-forced on its output), cached."""
        return compute_attribution(self.ref.stored, tuple(trace.source_ids), tuple(trace.output_ids), methods, steps,
                                   foil, tolerance)

    def deletions(self, trace: AttentionTrace, methods: tuple[str, ...], ranked: tuple[str, ...],
                  ks: tuple[int, ...], steps: int = DEFAULT_STEPS, tolerance: float = DEFAULT_TOLERANCE
                  ) -> pd.DataFrame:
        return compute_deletions(self.ref.stored, tuple(trace.source_ids), tuple(trace.output_ids), methods, ranked,
                                 ks, steps, tolerance)

    def layer_scores(self, sources: list[list[int]], targets: list[list[int]], kind: str, layer: int) -> LayerScores:
        return compute_layer_scores(self.ref.stored, tuple(map(tuple, sources)), tuple(map(tuple, targets)), kind,
                                    layer)


@contextmanager
def training_slot() -> Iterator[bool]:
    """Whether a synthetic training may run now (True: a server-wide slot is held until the block ends, also when
    a Stop or a new request cuts the run short)."""
    held = _TRAINING.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            _TRAINING.release()


def model_languages(directory: Path) -> str:
    """"en → de" for the model picker, from the directory's languages.json ("?" when it is unreadable); "language
    model" for a decoder-only one, "encoder" for an encoder-only one."""
    named = {"decoder": LANGUAGE_MODEL, "encoder": ENCODER}.get(model_kind(directory) or "")
    if named:
        return named
    try:
        return read_languages(directory).label
    except (OSError, ValueError):
        return "?"


_SERVING: ContextVar[Session | None] = ContextVar("viz_model_session", default=None)


@contextmanager
def serving(session: Session | None) -> Iterator[None]:
    """Hand `session` to the page the router runs inside this block (nothing is kept in session state: a rerun
    builds its session from the sidebar afresh)."""
    token = _SERVING.set(session)
    try:
        yield
    finally:
        _SERVING.reset(token)


def require_session() -> Session:
    """The session the router is serving this page with, or stop the page with a message (the sidebar shows why
    the model failed)."""
    session = _SERVING.get()
    if session is None:
        st.error("No model is loaded: pick another model in the sidebar, or see the error shown there.")
        st.stop()
    return session
