"""The sidebar every page shares: the model picker (it loads the model, cached), then the settings of the model's
kind, which build the run's `Session` (`registry.open_model` picks them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from app.sessions import (
    ENCODER,
    HUB_SERIES,
    LANGUAGE_MODEL,
    ModelRef,
    Session,
    load_hub_step,
    load_model,
    model_languages,
    roots_label,
    searching_model,
    series_folders,
)
from app.shared_settings import MAX_TOP_K_SHOWN, RULE_LABELS, SEARCH_LABELS, SHARED
from app.state import bound, rule_choice, search_beam, search_defaults
from app.texts import count, md_escape
from viz_model import EncoderModel, LanguageModel
from viz_model.hf.hub_cache import hub_offered, is_hub_id
from viz_model.kinds.translator import TranslationModel
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.modeldir.languages import name as language_name
from viz_model.modeldir.series import Series, folder_series
from viz_model.search.requests import MAX_TASK_PREFIX_CHARS
from viz_model.search.settings import MAX_BEAM, MAX_LENGTH_PENALTY
from viz_model.training_series import open_series
from viz_model.translation_tasks import TranslationTask, translation_tasks

SERIES = "checkpoint series"  # what the model picker says of a series folder (a language model across its training)
TASK_SEEN = "_sidebar_task_seen"  # (model, task) the sidebar last drew: a switch drops the typed task prefix


def pick_model(models: list[str]) -> tuple[TranslationModel | LanguageModel | EncoderModel, ModelRef] | None:
    """The model picker and its caption, or the hub series opened below it; loads the model (cached). None if it
    cannot load (said there)."""
    with st.sidebar:
        series = series_folders()
        kinds = {name: SERIES if name in series else model_languages(ModelRef.of(name).directory) for name in models}
        hub = hub_series()
        bound(st.selectbox, "Model", SHARED.model, models, help=f"Every model directory found in {roots_label()}",
              format_func=lambda n: f"{n} ({kinds[n]})" if kinds.get(n) in (LANGUAGE_MODEL, ENCODER, SERIES) else n,
              disabled=hub is not None)
        if hub is not None:
            return hub_step(hub)
        name = SHARED.model.get()
        ref = ModelRef.of(name) if name not in series else series_step(name)
        if ref is None:
            return None
        # the full name and the language pair below the picker: a long name is cut inside the box
        st.caption(f"{md_escape(name)} · {kinds.get(name) or model_languages(ref.directory)}")
        return loaded(lambda: load_model(ref), ref)


def loaded(load: Callable[[], TranslationModel | LanguageModel | EncoderModel], ref: ModelRef
           ) -> tuple[TranslationModel | LanguageModel | EncoderModel, ModelRef] | None:
    """`load()`'s model and `ref`; None where it cannot load (said in one line)."""
    try:
        return load(), ref
    except (CheckpointError, OSError, ValueError, RuntimeError) as err:
        st.error(f"This model cannot be loaded: {err}")
        return None


def hub_series() -> Series | None:
    """The form that opens a hub id's revisions (Pythia's step1000, ...) as a series in place of the picker's model,
    and closes it again; the series open, None for the picker's model. What cannot be a series is said in one
    line. Not offered where the server fetches nothing from the hub (`viz-model app --no-hub`)."""
    ss = st.session_state
    if not hub_offered():
        ss.pop(HUB_SERIES, None)
        return None
    with st.expander("A series on the hub", expanded=HUB_SERIES in ss):
        if HUB_SERIES in ss and st.button("Close the hub series", key="hub_series_close",
                                          help="Back to the model picked above"):
            del ss[HUB_SERIES]
        with st.form("hub_series_form", border=False):
            repo = st.text_input("Hub id", key="hub_series_id", placeholder="EleutherAI/pythia-70m")
            steps = st.text_input("Training steps", key="hub_series_steps", placeholder="0, 1000, 143000",
                                  help="The steps whose revisions the repository holds, named as Pythia's are "
                                       "(step0, step1000, ...). Each is fetched and imported on first use.")
            if st.form_submit_button("Open as a series"):
                opened = read_hub_series(repo.strip(), steps)
                if isinstance(opened, str):
                    st.error(opened)
                else:
                    ss[HUB_SERIES] = opened
    return ss.get(HUB_SERIES)


def read_hub_series(repo: str, steps: str) -> Series | str:
    """The series of hub id `repo` at the comma-separated `steps`; else the line that says why it is none."""
    if not is_hub_id(repo):
        return f"{repo!r} is not a hub id (owner/name, such as EleutherAI/pythia-70m)"
    try:
        numbers = [int(part) for part in steps.split(",") if part.strip()]
    except ValueError:
        numbers = []
    if not numbers or min(numbers) < 0:
        return "The training steps are whole numbers separated by commas, such as 0, 1000, 143000"
    try:
        return open_series(repo, numbers)
    except CheckpointError as err:  # too many steps
        return str(err)


def hub_step(series: Series) -> tuple[LanguageModel, ModelRef] | None:
    """The training-step slider of a hub id's series (its last step first), its caption, and the step's model and
    `ModelRef`; None where the step cannot be loaded or is not the first step's model (said there)."""
    step = st.select_slider("Training step", list(series.steps), series.steps[-1], key=f"hub_step_{series.source}",
                            help="Each step is the hub repository at that revision (fetched and imported on first "
                                 "use, then kept).")
    st.caption(f"{md_escape(series.source)} · {SERIES} on the hub · step {step} of {series.steps[-1]}: the revision "
               f"{md_escape(series.place(step))}")
    return loaded(lambda: load_hub_step(series, step), ModelRef.hub(series, step))


def series_step(name: str) -> ModelRef | None:
    """The training-step slider of the checkpoint series `name` (its last step first) and the step's `ModelRef`;
    None where the series cannot be read (said there)."""
    try:
        series = folder_series(series_folders()[name] / name)
    except CheckpointError as err:
        st.error(f"This series cannot be opened: {err}")
        return None
    step = st.select_slider("Training step", list(series.steps), series.steps[-1], key=f"series_step_{name}",
                            help="Each step is the model as saved at that point of its training (loaded on first "
                                 "use, then kept).")
    folder = Path(series.place(step)).name
    st.caption(f"Step {step} of {series.steps[-1]}: the checkpoint {md_escape(folder)}")
    return ModelRef.of(name, folder)


def translator_settings(model: TranslationModel, ref: ModelRef) -> Session:
    """A translation model's sidebar below the picker: its badge and shape, its card, the target language or task,
    the task prefix and the decoding settings."""
    name = ref.name
    cfg = model.config
    color = "green" if model.device.type == "cuda" else "gray"
    st.badge(f"Translation model · {model.device_label}", icon=":material/memory:", color=color)
    ref = ref.searching(SHARED.search.get())
    try:
        model = searching_model(ref)
    except ValueError as err:  # int8 where it cannot run (a GPU, fp16 weights): say why, search as auto does
        st.warning(f"Search precision {ref.precision}: {err}. Searching with auto instead.")
        ref = ref.searching("auto")
    lang = target_language(model)
    if lang:
        ref = ref.searching(ref.precision, lang)
        model = searching_model(ref)
    prefix = task_prefix(model)
    if prefix is not None:
        ref = ref.searching(ref.precision, ref.lang, prefix)
        model = searching_model(ref)
    rule = rule_choice(model.generation.rule)
    defaults = model.search_settings(rule)
    search_defaults(name, rule, defaults.beam, defaults.alpha)
    st.caption(f"{cfg.encoder_layers} encoder + {cfg.decoder_layers} decoder layers · {count(cfg.heads, 'head')} · "
               f"d_model {cfg.d_model} · at most {cfg.max_positions} tokens · search with "
               f"{model.search_precision} weights, every map and probability in full precision")
    card_button(model)
    decoding_settings(model, rule)
    return Session(model, ref, search_beam(), float(SHARED.alpha.get()), int(SHARED.top_k.get()),
                   bool(SHARED.truncate.get()), None if SHARED.rule.get() == "auto" else rule)


def kind_badge(model: LanguageModel | EncoderModel, kind: str) -> None:
    """The model's kind and where it runs, as a badge (green on a GPU)."""
    st.badge(f"{kind} · {'CPU' if model.device.type == 'cpu' else 'GPU'}", icon=":material/memory:",
             color="green" if model.device.type == "cuda" else "gray")


def card_button(model: TranslationModel | LanguageModel | EncoderModel) -> None:
    """The model card's button (where it has one), opening it in a wide window."""
    if model.card and st.button("Model card", icon=":material/description:", key="model_card_button",
                                help="Opens the model card in a wide window"):
        show_card(model.name, model.card)


def language_model_settings(model: LanguageModel, ref: ModelRef) -> Session:
    """A language model's sidebar below the picker: its kind and shape, its card and the top-k (it continues
    greedily)."""
    cfg = model.config
    kind_badge(model, "Language model")
    shared = f" sharing {count(cfg.kv_heads, 'key/value head')}" if cfg.kv_heads else ""
    st.caption(f"{cfg.decoder_layers} decoder layers · {count(cfg.heads, 'query head')}{shared} · "
               f"d_model {cfg.d_model} · {cfg.positional} positions · at most {cfg.max_positions} tokens · "
               "continues greedily")
    card_button(model)
    st.subheader("Decoding")
    bound(st.slider, "Top-k candidates per step", SHARED.top_k, 1, MAX_TOP_K_SHOWN)
    return Session(model, ref, 1, 0.0, int(SHARED.top_k.get()), False)


def encoder_settings(model: EncoderModel, ref: ModelRef) -> Session:
    """An encoder-only model's sidebar below the picker: its kind and shape, its card and the top-k predictions at
    each mask token."""
    cfg = model.config
    kind_badge(model, "Encoder")
    st.caption(f"{cfg.encoder_layers} encoder layers · {count(cfg.heads, 'head')} · d_model {cfg.d_model} · "
               f"{cfg.positional} positions · at most {model.network.longest} tokens · fills in its mask token "
               f"{md_escape(model.mask_token)}")
    card_button(model)
    st.subheader("Fill in the blank")
    bound(st.slider, "Top-k predictions per mask", SHARED.top_k, 1, MAX_TOP_K_SHOWN)
    return Session(model, ref, 1, 0.0, int(SHARED.top_k.get()), False)


def decoding_settings(model: TranslationModel, rule: str) -> None:
    """The search rule, greedy or beam search, beam size, length penalty, precision, top-k and truncation."""
    st.subheader("Decoding")
    own = RULE_LABELS[model.generation.rule].lower()
    bound(st.radio, "Search rule", SHARED.rule, list(RULE_LABELS),
          format_func=lambda v: f"The model's own ({own})" if v == "auto" else RULE_LABELS[v],
          help="As transformers' generate: the model's generation config (beam, length_penalty, "
               "early_stopping, max_length, ...) and transformers' beam search, so an imported model shows the "
               "translation its own framework gives. This project's: GNMT's length penalty ((5 + |Y|) / 6)^α, "
               "OpenNMT's stop, source + 50 tokens. Imported models search as transformers by default.")
    bound(st.radio, "Search", SHARED.decoding, ["greedy", "beam"], horizontal=True,
          format_func=lambda v: "Greedy" if v == "greedy" else "Beam search")
    if SHARED.decoding.get() == "beam":
        bound(st.slider, "Beam size", SHARED.beam, 2, MAX_BEAM)
    transformers_rule = rule == "transformers"
    low = -MAX_LENGTH_PENALTY if transformers_rule else 0.0
    SHARED.alpha.set(min(max(float(SHARED.alpha.get()), low), MAX_LENGTH_PENALTY))
    bound(st.slider, "Length penalty α", SHARED.alpha, low, MAX_LENGTH_PENALTY, step=0.1,
          help="transformers' length_penalty: a finished hypothesis scores log p / |Y|^α (above 0 favours "
               "longer translations)" if transformers_rule else
               "GNMT length penalty: log p / ((5 + |Y|) / 6)^α; higher favours longer translations (0 = none)")
    bound(st.radio, "Search precision", SHARED.search, list(SEARCH_LABELS), format_func=SEARCH_LABELS.get,
          help="Which weights beam search runs on. The maps and probabilities are always recomputed in full "
               "precision for the chosen output, so with int8 a step may show a top candidate other than the "
               "token the search chose (it is flagged). int8 can also change the translation itself.")
    if transformers_rule and model.search_precision == "int8":
        st.caption(":orange[int8 weights: the translation can differ from generate's; full precision gives "
                   "generate's.]")
    bound(st.slider, "Top-k candidates per step", SHARED.top_k, 1, MAX_TOP_K_SHOWN)
    bound(st.checkbox, "Cut sentences longer than the model's maximum", SHARED.truncate,
          help=f"Otherwise a sentence above {model.config.max_positions} tokens is refused with a message.")


def target_language(model: TranslationModel) -> str:
    """A many-to-many model's target-language picker (its codes, by name), or a T5's translation-task picker (the
    tasks its config lists); "" for the language or task it was imported with, and for a model of one fixed pair or
    task (no picker)."""
    tasks = translation_tasks(model)
    codes = [task.target for task in tasks] or model.target_languages
    if not codes:
        SHARED.lang.set("")
        return ""
    own = model.languages.target
    lang = SHARED.lang.get()
    if lang == own:
        SHARED.lang.set("")
    elif lang and lang not in codes:
        st.warning(f"`lang={lang[:20]}` ignored: not one of this model's {len(codes)} "
                   f"{'translation tasks' if tasks else 'languages'}.")
        SHARED.lang.set("")
    if tasks:
        return translation_task(model, tasks)
    options = ["", *sorted((c for c in codes if c != own), key=language_name)]
    bound(st.selectbox, "Translate into", SHARED.lang, options,
          format_func=lambda c: f"{language_name(c or own)} ({c or own})" + ("" if c else ", as imported"),
          help="A many-to-many model translates into any of its languages: that language's code is forced as "
               "its first output token (M2M100, NLLB, mBART-50) or starts its decoding (the original mBART).")
    return SHARED.lang.get()


def translation_task(model: TranslationModel, tasks: list[TranslationTask]) -> str:
    """A T5's task picker: the tasks its config lists, in its order; the target code of the task chosen ("" for the
    one it was imported with). A task switched drops a typed task prefix: the new task's own is shown."""
    own = model.languages.target
    labels = {task.target: task.label for task in tasks}
    bound(st.selectbox, "Translation task", SHARED.lang, ["", *(t.target for t in tasks if t.target != own)],
          format_func=lambda c: labels[c or own] + ("" if c else ", as imported"),
          help="The translation tasks this T5 model's config lists (task_specific_params): each puts its own prefix "
               "before every sentence, as transformers' translation pipeline did. Weights and settings are shared.")
    chosen = (model.name, SHARED.lang.get())
    seen = st.session_state.get(TASK_SEEN)
    if seen is not None and seen[0] == chosen[0] and seen != chosen:
        SHARED.prefix.set(None)
    st.session_state[TASK_SEEN] = chosen
    return SHARED.lang.get()


def task_prefix(model: TranslationModel) -> str | None:
    """A T5-family model's task prefix box (its own prefix until changed): the prefix typed, None for the model's own
    and for a model that reads no task from its text (no box)."""
    own = model.task_prefix
    if own is None:
        SHARED.prefix.set(None)
        return None
    typed = SHARED.prefix.get()
    if typed is not None:
        try:
            model.with_task_prefix(typed)  # from a link, or pasted: the model names what it refuses
        except ValueError as err:
            st.warning(f"Task prefix ignored: {err}.")
            SHARED.prefix.set(typed := None)
    st.session_state[SHARED.prefix.widget_key] = own if typed is None else typed
    st.text_input("Task prefix", key=SHARED.prefix.widget_key, max_chars=MAX_TASK_PREFIX_CHARS,
                  on_change=_prefix_typed, args=(own,),
                  help="A T5 model reads its task from the text: this goes before every sentence, as transformers' "
                       "translation pipeline put the model's own task"
                       + (f" ({own.strip()!r})" if own.strip() else " (this model has none)")
                       + ". Empty: the sentence as typed. Its pieces show among the source tokens.")
    return SHARED.prefix.get()


def _prefix_typed(own: str) -> None:
    typed = st.session_state[SHARED.prefix.widget_key]
    SHARED.prefix.set(None if typed == own else typed)


@st.dialog("Model card", width="large")
def show_card(name: str, card: str) -> None:
    """The model card in a wide dialog (the sidebar made it a very tall narrow column)."""
    st.caption(name)
    st.markdown(card)
