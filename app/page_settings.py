"""Each page's own settings, one frozen dataclass per page: session keys, defaults (where a page computes its default
from the model or the trace, it passes that to `Setting.init`) and the parameters that go into the link."""

from __future__ import annotations

from dataclasses import dataclass

from app.link_values import number, number_text, one_line, one_of, url_number, whole_number
from app.setting_types import Link, PageSettings, Setting
from app.texts import EXAMPLES
from viz_model.analysis.prompt_pairs import PROMPT_PAIRS
from viz_model.attribution.gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE
from viz_model.config.model import POSITIONAL_KINDS
from viz_model.lessons.induction_run import InductionConfig
from viz_model.lessons.watch_trainer import LIMITS, POSITIONAL, TASKS
from viz_model.search.settings import MAX_BEAM, MAX_LENGTH_PENALTY

LM_NEW_TOKENS, MAX_LM_NEW_TOKENS = 20, 200  # a language model's continuation on Complete & explore
LM_TRANSLATE_PROMPT = "English: {src}\nGerman:"  # Compare: a language model prompted to translate
STEP_CHOICES, LAYER_CHOICES, HEAD_CHOICES, WIDTH_CHOICES = [200, 400, 800, 1600, 3200], [1, 2], [1, 2, 4], [16, 32, 64]
EXPERIMENTS = ("task", "induction", "series")  # Watch attention form: a translation task, induction heads in a
# language model, or a model's own checkpoints across its training
INDUCTION_STEPS = [500, 1000, 2000, 3000, 5000]
MAX_PAIR_CHARS = 2_000  # an encoder's second sentence, in the link


def lengths_from(raw: str) -> tuple[int, int]:
    """The Watch page's sequence lengths from the link ("4-8")."""
    low, high = LIMITS["length"]
    parts = raw.split("-")
    values = [url_number(part) for part in parts]
    if len(values) != 2 or not low <= values[0] <= values[1] <= high:
        raise ValueError(f"use two lengths from {low} to {high}, the shorter first, as in 4-8")
    return values[0], values[1]


# --- Explore -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExploreSettings(PageSettings):
    """Translate & explore, beyond the shared view: the heatmap's rows and measure, the model view, the head view
    and the token focus (the view, kind, layer, head and level are `shared_settings.SHARED`'s)."""

    rows: Setting[str] = Setting("rows", "input")
    measure: Setting[str] = Setting("measure", "weights")
    aggregate: Setting[str] = Setting("mv_aggregate", "heads")
    model_view: Setting[dict | None] = Setting("mv_chart", None)  # the model view's selection
    drawn_heads: Setting[list[int]] = Setting("hv_heads", [])  # 0-based; by default the chosen head
    min_weight: Setting[float] = Setting("hv_min", 0.02)
    head_view: Setting[dict | None] = Setting("hv_chart", None)  # the head view's selection
    focus: Setting[tuple[str, int] | None] = Setting("hv_focus", None)  # the head view's clicked token
    sentences: Setting[str] = Setting("hv_sentences", "all")  # a pair's head view: "ab" = sentence A to B
    token: Setting[str] = Setting("focus_token", "q1")  # "q3" or "k2"
    drawing: Setting[str] = Setting("long_draw", "blocks")  # a heatmap of maps read by rows: "blocks" or "window"
    new_tokens: Setting[int] = Setting("lm_new_tokens", LM_NEW_TOKENS, Link(
        "new_tokens", whole_number(1, MAX_LM_NEW_TOKENS), omit_default=True))  # a language model's continuation
    chat: Setting[bool] = Setting("lm_chat", False, Link("chat", one_of([True, False]), lambda v: str(bool(v)),
                                                         omit_default=True))  # through the chat template
    system: Setting[str] = Setting("lm_system", "", Link("system", one_line(500, "a system message"),
                                                         omit_default=True))  # the chat's system message
    pair: Setting[str] = Setting("pair", "", Link("pair", one_line(MAX_PAIR_CHARS, "a second sentence"),
                                                  omit_default=True))  # an encoder's second sentence ("": none)
    pair_box: Setting[str] = Setting("pair_input", "")  # its box in the form
    masked_word: Setting[int | None] = Setting("mask_word", None)  # the word clicked to mask it
    moe_layer: Setting[int] = Setting("moe_layer", 1)  # a mixture of experts' routing: its layer (1-based)
    moe_head: Setting[int] = Setting("moe_head", 1)  # and the head whose attention it is compared with


@dataclass(frozen=True)
class MasksSettings(PageSettings):
    """Masks: the batch's second sentence, the map (kind, layer, head: 1-based) and the sentence shown."""

    other: Setting[str | None] = Setting("m_other", None)
    kind: Setting[str] = Setting("m_kind", "encoder")  # by default the explorer's
    layer: Setting[int] = Setting("m_layer", 1)
    head: Setting[int] = Setting("m_head", 1)
    row: Setting[int] = Setting("m_row", 0)  # by default the padded one
    padding_side: Setting[str | None] = Setting("m_pad_side", None)  # a language model's batch: by default its own


# --- Analyze -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttributionSettings(PageSettings):
    """Attribution: the methods, integrated gradients' points and tolerance, the output token, the foil, the matrix's
    method and the translation whose faithfulness was checked."""

    methods: Setting[list[str]] = Setting("at_methods", ["attention", "value_weighted", "alti", "saliency"])
    tolerance: Setting[float] = Setting("at_tolerance", DEFAULT_TOLERANCE)
    steps: Setting[int] = Setting("at_steps", DEFAULT_STEPS)
    output: Setting[int] = Setting("at_output", 0)
    foil: Setting[str] = Setting("at_foil", "")
    matrix: Setting[str] = Setting("at_matrix", "alti")
    checked: Setting[tuple | None] = Setting("at_checked", None)  # (source ids, output ids)
    target: Setting[str] = Setting("at_target", "")  # a language model's forced continuation


@dataclass(frozen=True)
class HeadRolesSettings(PageSettings):
    """Head roles: stored or live statistics, the live sentences (submitted, and in their box), the statistic; with
    a language model, what its scores are measured on and the score drawn."""

    source: Setting[str] = Setting("hr_source", "stored")
    text: Setting[str] = Setting("hr_text", "\n".join(EXAMPLES))
    text_box: Setting[str] = Setting("hr_text_input", "")
    statistic: Setting[str] = Setting("hr_stat", "entropy")
    lm_source: Setting[str] = Setting("hr_lm_source", "repeated")
    lm_score: Setting[str] = Setting("hr_lm_score", "induction")
    encoder_source: Setting[str] = Setting("hr_enc_source", "corpus")  # an encoder's: its text or the corpus
    encoder_score: Setting[str] = Setting("hr_enc_score", "sep")
    detect: Setting[bool] = Setting("hr_detect", False)  # a language model's head detector section, on
    detector: Setting[str] = Setting("hr_detector", "duplicate_token")  # a pattern's name, or "drawn": the user's
    detector_text: Setting[str] = Setting("hr_det_text", "repeated")  # one repeated random sequence, or the prompt
    exclude_bos: Setting[bool] = Setting("hr_det_bos", True)
    exclude_current: Setting[bool] = Setting("hr_det_current", False)


@dataclass(frozen=True)
class AblationSettings(PageSettings):
    """Ablation: the heads switched off (kind, 0-based layer and head), the grids' redraw count, the measure."""

    heads: Setting[list[tuple[str, int, int]]] = Setting("abl_heads", [])  # by default the last cross layer's first
    redraws: Setting[int] = Setting("abl_grid_n", 0)
    metric: Setting[str] = Setting("abl_metric", "nll_rise")


@dataclass(frozen=True)
class PatchingSettings(PageSettings):
    """Head patching: the prompt pair (a shipped one's key, or "own"), the clean and corrupted prompts, the answer and
    wrong tokens ("": the runs' top tokens), the head whose maps are drawn (0-based layer and head; None: the one
    that restores most) and the grid's redraw count."""

    pair: Setting[str] = Setting("pat_pair", PROMPT_PAIRS[0].key)
    clean: Setting[str] = Setting("pat_clean", PROMPT_PAIRS[0].clean)
    corrupted: Setting[str] = Setting("pat_corrupted", PROMPT_PAIRS[0].corrupted)
    answer: Setting[str] = Setting("pat_answer", "")
    wrong: Setting[str] = Setting("pat_wrong", "")
    head: Setting[tuple[int, int] | None] = Setting("pat_head", None)
    redraws: Setting[int] = Setting("pat_grid_n", 0)


@dataclass(frozen=True)
class AlignmentSettings(PageSettings):
    """Alignment & rollout: the cross-attention map read as links and a typed gold alignment; rollout's kind, layer
    and residual share (layers 1-based, by default the last)."""

    layer: Setting[int] = Setting("al_layer", 1)
    head: Setting[int | str] = Setting("al_head", "mean")
    rows: Setting[str] = Setting("al_rows", "output")
    threshold: Setting[float] = Setting("al_threshold", 0.0)
    gold: Setting[str] = Setting("al_gold", "")
    rollout_kind: Setting[str] = Setting("ro_kind", "encoder")
    rollout_layer: Setting[int] = Setting("ro_layer", 1)
    residual: Setting[float] = Setting("ro_residual", 0.5)
    rollout_token: Setting[str] = Setting("ro_token", "")  # a long prompt's query ("q812"), by default the last


@dataclass(frozen=True)
class CompareSettings(PageSettings):
    """Compare: the map (kind, layer, head), the second sentence (and the first it was made for), the second model."""

    kind: Setting[str] = Setting("cmp_kind", "encoder")  # by default the explorer's
    layer: Setting[int] = Setting("cmp_layer", 1)
    head: Setting[int | str] = Setting("cmp_head", "mean")
    other: Setting[str] = Setting("cmp_other", "")
    other_for: Setting[str | None] = Setting("cmp_other_for", None)
    model: Setting[str] = Setting("cmp_model", "")
    source: Setting[str | None] = Setting("cmp_source", None)  # a language model beside a translator: the text
    template: Setting[str] = Setting("cmp_template", LM_TRANSLATE_PROMPT)  # how the language model is asked
    translator: Setting[str] = Setting("cmp_translator", "")
    lm_layer: Setting[int] = Setting("cmp_lm_layer", 1)
    lm_head: Setting[int | str] = Setting("cmp_lm_head", "mean")


@dataclass(frozen=True)
class SinksSettings(PageSettings):
    """Attention sinks: the head whose keys are drawn (1-based) and the switch that hides the first token (in the
    link), the other heavy tokens hidden too (0-based positions) and the grid's redraw count (the prompt form's
    continuation length is Complete & explore's)."""

    layer: Setting[int] = Setting("sk_layer", 1, Link("sink_layer", whole_number(1, 1_000), omit_default=True))
    head: Setting[int] = Setting("sk_head", 1, Link("sink_head", whole_number(1, 1_000), omit_default=True))
    switch: Setting[bool] = Setting("sk_switch", False, Link("hide_first", one_of([True, False]),
                                                             lambda v: str(bool(v)), omit_default=True))
    also: Setting[list[int]] = Setting("sk_also", [])
    redraws: Setting[int] = Setting("sk_grid_n", 0)
    evict_text: Setting[str] = Setting("sk_evict_text", "")  # empty: the shipped long text
    evict_tokens: Setting[int] = Setting("sk_evict_tokens", 256)
    evict_window: Setting[int] = Setting("sk_evict_window", 32)
    evict_rule: Setting[str] = Setting("sk_evict_rule", "cache")  # StreamingLLM's positions, or the text's
    evicted: Setting[object | None] = Setting("sk_evicted", None)  # (model, Eviction)


@dataclass(frozen=True)
class LogitLensSettings(PageSettings):
    """Logit lens: the cell chosen (its row: 0 the embeddings, i after block i; its 0-based position; by default the
    model's own output at the last position), the token followed through the rows (by default the cell's position's
    prediction) and the grid's redraw count."""

    row: Setting[int | None] = Setting("ll_row", None)
    position: Setting[int | None] = Setting("ll_position", None)
    token: Setting[int | None] = Setting("ll_token", None)
    redraws: Setting[int] = Setting("ll_grid_n", 0)


# --- Learn -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PositionalSettings(PageSettings):
    """Positional encoding: positions and dimensions drawn, the shift lesson, the learned model, the sentence's side
    and token, and the experiment (layers 1-based)."""

    length: Setting[int] = Setting("pe_length", 32)  # by default the sentence's length
    dims: Setting[list[int]] = Setting("pe_dims", [])  # by default a few of every layout
    offset: Setting[int] = Setting("pe_k", 3)
    zoom: Setting[int] = Setting("pe_zoom", 16)
    learned: Setting[str] = Setting("pe_learned", "")
    side: Setting[str] = Setting("pe_side", "source")
    token: Setting[int] = Setting("pe_token", 1)
    experiment: Setting[str] = Setting("pe_exp", "no_pe")
    shuffle_seed: Setting[int] = Setting("pe_seed", 1)
    experiment_kind: Setting[str] = Setting("pe_exp_kind", "encoder")
    experiment_layer: Setting[int] = Setting("pe_exp_layer", 1)
    scheme: Setting[str] = Setting("pe_scheme", "rope")
    scheme_length: Setting[int] = Setting("pe_scheme_len", 32)
    split_stack: Setting[str] = Setting("pe_split_stack", "encoder")
    split_layer: Setting[int] = Setting("pe_split_layer", 1)
    split_head: Setting[int] = Setting("pe_split_head", 1)
    split_query: Setting[int] = Setting("pe_split_query", 0)
    split_key: Setting[int] = Setting("pe_split_key", 0)
    length_task: Setting[str] = Setting("pe_len_task", "copy")
    length_schemes: Setting[list[str]] = Setting("pe_len_schemes", list(POSITIONAL_KINDS))
    length_seconds: Setting[int] = Setting("pe_len_seconds", 15)
    length_seed: Setting[int] = Setting("pe_len_seed", 0)
    length_result: Setting[object | None] = Setting("pe_len_result", None)
    length_kind: Setting[str] = Setting("pe_len_kind", "cross")
    scheme_model: Setting[str] = Setting("pe_scheme_model", "")  # the model the scheme was last opened for
    lm_layer: Setting[int] = Setting("pe_lm_layer", 1)  # a language model's layer: RoPE's decay
    lm_band_layer: Setting[int] = Setting("pe_lm_band_layer", 1)  # and its frequency pairs
    lm_distances: Setting[int] = Setting("pe_lm_distances", 64)
    lm_compared: Setting[list[str]] = Setting("pe_lm_compared", ["linear", "llama3", "yarn", "dynamic"])  # RoPE's
    lm_compare_factor: Setting[float] = Setting("pe_lm_compare_factor", 4.0)  # scalings beside the model's own
    lm_own_scaling: Setting[bool] = Setting("pe_lm_own_scaling", True)  # the length experiment with the config's
    lm_measured_scaling: Setting[bool] = Setting("pe_lm_measured_scaling", True)  # scaling, as last measured
    lm_tokens: Setting[int] = Setting("pe_lm_tokens", 0)  # by default twice the trained length, within the text
    lm_window: Setting[int] = Setting("pe_lm_window", 16)
    lm_loss: Setting[object | None] = Setting("pe_lm_loss", None)  # (model, tokens, PositionLoss)
    lm_factor: Setting[float] = Setting("pe_lm_factor", 4.0)  # RoPE's scalings switched on past the length
    lm_scalings: Setting[list[str]] = Setting("pe_lm_scalings", ["linear", "dynamic", "yarn", "llama3"])
    lm_scaled: Setting[object | None] = Setting("pe_lm_scaled", None)  # (model, tokens, {run: PositionLoss})


@dataclass(frozen=True)
class AttentionByHandSettings(PageSettings):
    """Attention by hand: the matrices (the editors' starting tables and the last valid ones), their widths, the
    query followed, the saturation sampling, the causal mask and the multi-head section."""

    base: Setting[dict | None] = Setting("abh_base", None)
    current: Setting[dict | None] = Setting("abh_current", None)
    d_in: Setting[int] = Setting("abh_d_in", 4)
    d_k: Setting[int] = Setting("abh_d_k", 3)
    d_v: Setting[int] = Setting("abh_d_v", 3)
    query: Setting[int] = Setting("abh_query", 0)
    keys: Setting[int] = Setting("abh_keys", 10)
    samples: Setting[int] = Setting("abh_samples", 1000)
    seed: Setting[int] = Setting("abh_seed", 0)
    mask_scaled: Setting[bool] = Setting("abh_mask_scaled", True)
    heads: Setting[int] = Setting("abh_heads", 2)  # by default the second divisor of the width
    head_seed: Setting[int] = Setting("abh_mh_seed", 0)
    head_causal: Setting[bool] = Setting("abh_mh_causal", False)
    lm_layer: Setting[int] = Setting("abh_lm_layer", 1)  # a language model's head (1-based) and query (0-based)
    lm_head: Setting[int] = Setting("abh_lm_head", 1)
    lm_query: Setting[int | None] = Setting("abh_lm_query", None)  # by default the prompt's last token
    lm_token: Setting[str] = Setting("abh_lm_token", "")  # a long prompt's query ("q812") and key window's centre
    lm_key: Setting[str] = Setting("abh_lm_key", "")
    enc_layer: Setting[int] = Setting("abh_enc_layer", 1)  # an encoder's head (1-based) and query (0-based)
    enc_head: Setting[int] = Setting("abh_enc_head", 1)
    enc_query: Setting[int | None] = Setting("abh_enc_query", None)  # by default the first mask token

    @staticmethod
    def editor(name: str) -> Setting:
        """The data editor of matrix `name` (its edits; removed to start again from `base`)."""
        return Setting(f"abh_edit_{name}", None)


@dataclass(frozen=True)
class DecodingSettings(PageSettings):
    """Decoding step by step: the step, the cross-attention layer and the beam tree's search; all in the link."""

    step: Setting[int] = Setting("dec_step", 1, Link("step", whole_number(1, 100_000)))
    layer: Setting[int] = Setting("dec_layer", 1, Link("cross_layer", whole_number(1, 1_000)))  # by default the last
    beam: Setting[int] = Setting("dec_beam", 4, Link("tree_beam", whole_number(1, MAX_BEAM)))  # by default the sidebar
    alpha: Setting[float] = Setting("dec_alpha", 0.6, Link(
        "tree_alpha", number(-MAX_LENGTH_PENALTY, MAX_LENGTH_PENALTY), number_text))  # by default the sidebar
    pruned: Setting[int] = Setting("dec_per_parent", 0, Link("tree_pruned", whole_number(0, 2 * MAX_BEAM)))


@dataclass(frozen=True)
class TrainingSettings(PageSettings):
    """The training recipe: the schedule's and label smoothing's inputs (by default the model's recipe where it has
    one), and the layer-timing measurement's inputs and result."""

    d_model: Setting[int] = Setting("tr_d_model", 512)
    warmup: Setting[int] = Setting("tr_warmup", 4000)
    mode: Setting[str] = Setting("tr_mode", "scale")
    peak: Setting[float] = Setting("tr_peak", 7e-4)
    scale: Setting[float] = Setting("tr_scale", 1.0)
    steps: Setting[int] = Setting("tr_steps", 20_000)
    epochs: Setting[int] = Setting("tr_epochs", 20)
    epoch_steps: Setting[int] = Setting("tr_epoch_steps", 1000)
    cooldown: Setting[int] = Setting("tr_cooldown", 0)
    epsilon: Setting[float] = Setting("tr_eps", 0.1)
    vocab: Setting[int] = Setting("tr_vocab", 10)
    target: Setting[int] = Setting("tr_target", 3)
    lengths: Setting[list[int]] = Setting("tr_lengths", [16, 64, 256, 1024])
    width: Setting[int] = Setting("tr_d", 512)
    heads: Setting[int] = Setting("tr_heads", 8)
    kernel: Setting[int] = Setting("tr_kernel", 3)
    measured: Setting[object] = Setting("tr_measured", None)

    def init_from(self, config, facts) -> None:
        """Where session state has no value yet: the loaded model's width and heads, its recipe where it has one
        (`facts`, its training_facts.json), else the declared defaults (the paper's)."""
        values = [(self.d_model, config.d_model), (self.width, config.d_model), (self.heads, config.heads)]
        if facts is not None:
            values += [(self.warmup, facts.warmup_steps), (self.scale, facts.lr_scale), (self.epochs, facts.epochs),
                       (self.epoch_steps, facts.steps_per_epoch), (self.cooldown, facts.cooldown_epochs),
                       (self.epsilon, facts.label_smoothing)]
            if facts.lr_peak:
                values += [(self.mode, "peak"), (self.peak, facts.lr_peak)]
        for setting, value in values:
            setting.init(value)
        for setting in self.settings():
            setting.init()


@dataclass(frozen=True)
class WatchSettings(PageSettings):
    """Watch attention form: the training form (every field in the link), the runs, and the drawn snapshot."""

    task: Setting[str] = Setting("watch_task", "copy", Link("task", one_of(TASKS)))
    lengths: Setting[tuple[int, int]] = Setting("watch_lengths", (4, 8),
                                                Link("lengths", lengths_from, lambda v: f"{v[0]}-{v[1]}"))
    shift: Setting[int] = Setting("watch_shift", 1, Link("k", whole_number(1, LIMITS["length"][1] - 1)))
    layers: Setting[int] = Setting("watch_layers", 1, Link("layers", one_of(LAYER_CHOICES)))
    heads: Setting[int] = Setting("watch_heads", 2, Link("heads", one_of(HEAD_CHOICES)))
    d_model: Setting[int] = Setting("watch_d_model", 32, Link("d_model", one_of(WIDTH_CHOICES)))
    positional: Setting[str] = Setting("watch_pe", "sinusoidal", Link("pe", one_of(POSITIONAL)))
    compare: Setting[bool] = Setting("watch_compare", True, Link("compare", one_of([True, False]),
                                                                lambda v: str(bool(v))))
    steps: Setting[int] = Setting("watch_steps", 800, Link("steps", one_of(STEP_CHOICES)))
    seconds: Setting[int] = Setting("watch_seconds", 30, Link("seconds", whole_number(5, 60)))
    seed: Setting[int] = Setting("watch_seed", 0, Link("seed", whole_number(0, 1_000_000)))
    runs: Setting[dict | None] = Setting("watch_runs", None)
    running: Setting[bool] = Setting("watch_running", False)
    snapshot: Setting[int] = Setting("watch_snapshot", 0)
    kind: Setting[str] = Setting("watch_kind", "cross")
    layer: Setting[int] = Setting("watch_layer", 0)
    head: Setting[int | str] = Setting("watch_head", "mean")
    animated: Setting[str] = Setting("watch_animated", "")
    own_sequence: Setting[str] = Setting("watch_own", "")
    experiment: Setting[str] = Setting("watch_experiment", "task", Link("experiment", one_of(EXPERIMENTS),
                                                                        omit_default=True))
    ind_steps: Setting[int] = Setting("watch_ind_steps", InductionConfig.steps, Link(
        "induction_steps", one_of(INDUCTION_STEPS), omit_default=True))
    ind_seconds: Setting[int] = Setting("watch_ind_seconds", int(InductionConfig.seconds), Link(
        "induction_seconds", whole_number(5, 120), omit_default=True))
    ind_seed: Setting[int] = Setting("watch_ind_seed", 0, Link("induction_seed", whole_number(0, 1_000_000),
                                                               omit_default=True))
    induction: Setting[object | None] = Setting("watch_induction", None)  # the last InductionResult
    ind_running: Setting[bool] = Setting("watch_ind_running", False)
    ind_layer: Setting[int] = Setting("watch_ind_layer", -1)  # -1: the strongest induction head's
    ind_head: Setting[int] = Setting("watch_ind_head", -1)
    series: Setting[str] = Setting("watch_series", "")  # the name of the series folder shown
    series_score: Setting[str] = Setting("watch_series_score", "induction")


EXPLORE, MASKS = ExploreSettings(), MasksSettings()
ATTRIBUTION, HEAD_ROLES, ABLATION = AttributionSettings(), HeadRolesSettings(), AblationSettings()
PATCHING = PatchingSettings()
ALIGNMENT, COMPARE = AlignmentSettings(), CompareSettings()
POSITIONAL_ENCODING, BY_HAND, DECODING = PositionalSettings(), AttentionByHandSettings(), DecodingSettings()
TRAINING, WATCH, SINKS = TrainingSettings(), WatchSettings(), SinksSettings()
LOGIT_LENS = LogitLensSettings()
BY_PAGE: dict[str, PageSettings] = {  # by the page's key in app/registry.py
    "explore": EXPLORE, "masks": MASKS, "attribution": ATTRIBUTION, "head_roles": HEAD_ROLES, "ablation": ABLATION,
    "alignment": ALIGNMENT, "compare": COMPARE, "positional": POSITIONAL_ENCODING, "by_hand": BY_HAND,
    "decoding": DECODING, "training": TRAINING, "watch": WATCH, "sinks": SINKS,
    "logit_lens": LOGIT_LENS, "patching": PATCHING}
