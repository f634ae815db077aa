"""What the decoder-only families' imports share (GPT-2, Llama, Mistral, Qwen2, ...): RoPE's settings, the tokenizer as
transformers 5 builds it, the end-of-text ids, the config's common fields and the one-line refusals of what the
instrumented model does not implement."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from ..search.causal import LMSearch
from ..search.settings import NEUTRAL
from ..tokenization.lm_tokenizer import LMTokenizer
from .arguments import argument
from .common import HFImportError, checked_config, need, read_json_file, tokenizer_settings
from .json_tokenizer import tokenizer_source

ROPE_TYPES = ("default", "linear", "llama3", "yarn", "dynamic")
MAX_GENERATION_CONFIG_BYTES = 1024**2
SEARCH_SETTINGS = ("num_beams", "length_penalty", "early_stopping", "repetition_penalty", "no_repeat_ngram_size")
# what generate(do_sample=False) would apply beside them, with the value that changes nothing: refused otherwise
NOT_APPLIED = {**{k: v for k, v in NEUTRAL.items() if k != "repetition_penalty"}, "min_length": 0,
               "min_new_tokens": None, "bad_words_ids": None, "suppress_tokens": None, "forced_bos_token_id": None,
               "forced_eos_token_id": None, "renormalize_logits": False}


def rope_settings(hf: dict[str, Any], path: Path, head_width: int | None = None) -> dict[str, Any]:
    """Our RoPE options of a config's ``rope_parameters`` (transformers 5) or legacy ``rope_theta`` +
    ``rope_scaling`` (GPT-NeoX's ``rotary_emb_base``, ``rotary_pct``); any rope type but default, linear, llama3, yarn
    and dynamic is refused in one line naming it, and so is a partial rotary factor unless `head_width` (the family's
    head width: GPT-NeoX, Phi) makes it the number of dimensions turned."""
    params = hf.get("rope_parameters") or {}
    legacy = hf.get("rope_scaling") or {}
    if not isinstance(params, dict) or not isinstance(legacy, dict):
        raise HFImportError(f"{path}: rope_parameters must be one mapping (per-layer RoPE is not implemented)")
    params = {**legacy, **params}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise HFImportError(f"{path}: rope_type {kind!r} is not implemented ({', '.join(ROPE_TYPES)} are); it is "
                            "refused rather than run as a different model")
    partial = float(params.get("partial_rotary_factor", hf.get("partial_rotary_factor", hf.get("rotary_pct", 1.0))))
    if partial != 1.0 and head_width is None:
        raise HFImportError(f"{path}: partial_rotary_factor {partial} is not implemented for {hf.get('model_type')} "
                            "(GPT-NeoX's, Phi's and Phi-3's partial rotary is)")
    theta = params.get("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    settings: dict[str, Any] = {"rope_base": float(theta), "rope_scaling": kind}
    if head_width is not None and int(head_width * partial) != head_width:
        settings["rope_dims"] = int(head_width * partial)  # transformers' int(): the first dimensions of each head
    if kind not in ("default", "yarn"):
        settings["rope_factor"] = float(need(params, "factor", path))
    if kind == "llama3":
        settings.update(rope_low_freq_factor=float(need(params, "low_freq_factor", path)),
                        rope_high_freq_factor=float(need(params, "high_freq_factor", path)),
                        rope_original_max_positions=int(params.get("original_max_position_embeddings",
                                                                   hf["max_position_embeddings"])))
    if kind == "yarn":
        settings.update(yarn_settings(params, hf))
    if kind == "dynamic":  # transformers grows the base past max_position_embeddings, not the original length
        settings["rope_original_max_positions"] = int(hf["max_position_embeddings"])
    return settings


def yarn_settings(params: dict[str, Any], hf: dict[str, Any]) -> dict[str, Any]:
    """Our YaRN options of its rope parameters, with transformers' defaults: the factor (None: max_position_embeddings
    over the original), beta_fast 32 and beta_slow 1 where unset or 0, truncate true, the attention factor given or
    left to be made from the factor and mscale / mscale_all_dim."""
    original = int(hf.get("original_max_position_embeddings")  # Phi-3 keeps it beside rope_parameters; it wins
                   or params.get("original_max_position_embeddings", hf["max_position_embeddings"]))
    factor = params.get("factor")
    factor = hf["max_position_embeddings"] / original if factor is None else factor
    given = params.get("attention_factor")
    return {"rope_factor": float(factor), "rope_original_max_positions": original,
            "rope_beta_fast": float(params.get("beta_fast") or 32),
            "rope_beta_slow": float(params.get("beta_slow") or 1), "rope_truncate": bool(params.get("truncate", True)),
            "rope_attention_factor": None if given is None else float(given),
            "rope_mscale": float(params.get("mscale") or 0.0),
            "rope_mscale_all_dim": float(params.get("mscale_all_dim") or 0.0)}


def generation_config(folder: Path) -> dict[str, Any]:
    """The folder's generation_config.json ({} where it has none)."""
    path = folder / "generation_config.json"
    if not path.is_file():
        return {}
    generation = read_json_file(path, MAX_GENERATION_CONFIG_BYTES, "not a generation config")
    return generation if isinstance(generation, dict) else {}


def search_settings(folder: Path) -> dict[str, Any]:
    """The generation config's settings `LMSearch` applies as ``generate(do_sample=False)`` does (those set); one
    line for any other it would apply that is set to change the output."""
    generation = generation_config(folder)
    path = folder / "generation_config.json"
    for key, neutral in NOT_APPLIED.items():
        if generation.get(key) not in (None, neutral, [], {}):
            raise HFImportError(f"{path}: {key} = {generation[key]!r} is not implemented for a language model's "
                                "search; it is refused rather than searched differently from generate()")
    settings = {key: generation[key] for key in SEARCH_SETTINGS if generation.get(key) is not None}
    try:
        LMSearch(**settings)
    except ValueError as err:
        raise HFImportError(f"{path}: {err}") from None
    return settings


def chat_settings(folder: Path) -> tuple[str | None, dict[str, str]]:
    """The folder's chat template (its default one where it names several; None without one) and the special
    tokens' text the template reads, as transformers' tokenizer of the folder has them (None, {} without
    transformers)."""
    try:
        import transformers
    except ImportError:
        return None, {}
    try:
        built = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except Exception as err:  # any reason transformers gives: its first line names it
        raise HFImportError(f"{folder}: transformers cannot read this folder's tokenizer ({err})") from None
    template = getattr(built, "chat_template", None)
    template = template.get("default") if isinstance(template, dict) else template
    specials = {name: str(value) for name, value in built.special_tokens_map.items() if isinstance(value, str)}
    return (template if isinstance(template, str) else None), specials


def end_ids(folder: Path, hf: dict[str, Any]) -> list[int]:
    """The ids that end a continuation: generation_config.json's eos_token_id, else config.json's (one or a list)."""
    eos = hf.get("eos_token_id")
    generation = generation_config(folder)
    if generation.get("eos_token_id") is not None:
        eos = generation["eos_token_id"]
    ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise HFImportError(f"{folder}: eos_token_id must be an id or a list of ids, got {eos!r}")
    return ids


def lm_tokenizer(folder: Path, hf: dict[str, Any], source: str | None = None, target: str | None = None
                 ) -> LMTokenizer:
    """The folder's tokenizer as transformers 5 builds it (its post-processor adds the BOS where the family does),
    with the end ids and the model's id table."""
    if source or target:
        raise HFImportError(f"{argument('source_lang')} / {argument('target_lang')} choose a translation model's "
                            "pair; a language model has none")
    settings = tokenizer_settings(folder)
    data = tokenizer_source(folder)
    template, specials = chat_settings(folder)
    rules = LMTokenizer.rules_file(ids=hf.get("vocab_size", 0), eos=end_ids(folder, hf),
                                   clean_up_spaces=bool(settings.get("clean_up_tokenization_spaces", False)),
                                   chat_template=template, special_tokens=specials,
                                   sampling=bool(generation_config(folder).get("do_sample", False)),
                                   generation=search_settings(folder))
    try:
        return LMTokenizer.from_files({"tokenizer.json": data, LMTokenizer.MARKER: rules}, folder)
    except ValueError as err:
        raise HFImportError(str(err)) from None


def decoder_config(hf: dict[str, Any], path: Path, eos: list[int], **values: Any) -> ModelConfig:
    """A decoder-only `ModelConfig` with the fields every family shares and `values`; refuses a model that is not a
    plain causal language model (cross-attention, a mixture of experts unless `values` sets ``experts``: Mixtral,
    gpt-oss)."""
    for key in ("num_local_experts", "num_experts", "add_cross_attention"):
        if hf.get(key) and not (key == "num_local_experts" and values.get("experts")):
            raise HFImportError(f"{path}: {key} = {hf[key]!r} is not implemented (a plain decoder-only model is)")
    vocab = int(need(hf, "vocab_size", path))
    first_eos = eos[0] if eos else 0
    bos = hf.get("bos_token_id")
    defaults = dataclasses.asdict(ModelConfig())
    fields = {**defaults, "kind": "decoder", "encoder_layers": 0, "vocab_size": vocab, "dropout": 0.0,
              "norm": "pre", "share_embeddings": True, "scale_embeddings": False, "pad_id": first_eos,
              "eos_id": first_eos, "bos_id": bos if isinstance(bos, int) else first_eos, "unk_id": 0, **values}
    return checked_config(path, **fields)


def placed(state: dict[str, Tensor], names: dict[str, str], ignored: set[str], path: Path) -> dict[str, Tensor]:
    """Our state dict: for each of our names the checkpoint's tensor `names` gives; a missing tensor, or one neither
    placed nor `ignored` (RoPE's stored frequencies always are), is refused in one line naming it."""
    missing = sorted(theirs for theirs in names.values() if theirs not in state)
    if missing:
        raise HFImportError(f"{path}: no tensor {', '.join(missing[:5])}")
    unused = sorted(set(state) - set(names.values()) - ignored - {k for k in state if k.endswith("inv_freq")})
    if unused:
        raise HFImportError(f"{path}: tensors this import does not place: {', '.join(unused[:5])}")
    return {ours: state[theirs] for ours, theirs in names.items()}


def per_head_qkv(flat: dict[str, Tensor], cfg: ModelConfig) -> dict[str, Tensor]:
    """`flat` with each fused ``w_qkv`` (weight or bias) split into Q, K and V where its rows hold each head's query,
    key and value side by side (``[q_h, k_h, v_h]`` per head: BLOOM, GPT-NeoX), not all queries first."""
    mapped: dict[str, Tensor] = {}
    for name, tensor in flat.items():
        if ".w_qkv." not in name:
            mapped[name] = tensor
            continue
        per_head = tensor.reshape(cfg.heads, 3, cfg.d_head, *tensor.shape[1:])  # rows: head, (q, k, v), dim
        for part, index in (("w_q", 0), ("w_k", 1), ("w_v", 2)):
            mapped[name.replace("w_qkv", part)] = per_head[:, index].reshape(cfg.d_model, *tensor.shape[1:]).clone()
    return mapped


def conversion_lines(cfg: ModelConfig) -> list[str]:
    """How a decoder-only checkpoint maps onto the instrumented model, for the model card."""
    grouped = f", {cfg.kv_heads} key/value heads" if cfg.kv_heads else ""
    window = f", a sliding window of {cfg.sliding_window} keys" if cfg.sliding_window else ""
    layout = {"post": "post-norm", "pre": "pre-norm" if cfg.input_norm else "output-norm"}[cfg.norm]
    layout += " parallel (attention and feed-forward side by side)" if cfg.parallel_residual else ""
    turned = f", {cfg.rope_dims} of {cfg.d_head} dimensions turned" if cfg.rope_dims else ""
    window += f", a mixture of {cfg.experts} experts ({cfg.experts_per_token} a token)" if cfg.experts else ""
    window += ", a learned sink logit in every head" if cfg.learned_sinks else ""
    return [f"- Decoder-only: {cfg.decoder_layers} {layout} layers ({cfg.normalization} norm), {cfg.heads} query "
            f"heads{grouped}, positions {cfg.positional}"
            + (f" (scaling {cfg.rope_scaling}{turned})" if cfg.positional == "rope" else "") + window + "."]
