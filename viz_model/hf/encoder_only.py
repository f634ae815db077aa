"""What the encoder-only families' imports share (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA): the tokenizer as
transformers 5 builds it with its mask token and token types, the config's common fields, whether the folder has a
masked-LM head (without one it opens for its maps only), and the import itself (a self-contained model directory,
its weights copied)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..config import ModelConfig
from ..modeldir.checkpoint import MAX_WEIGHTS_BYTES, planned_model, save_model_dir
from ..nn.encoder_lm import MaskedLM
from ..tokenization.encoder_tokenizer import EncoderTokenizer
from .arguments import argument
from .common import Family, HFImportError, checked_config, need, tokenizer_settings, write_staged
from .json_tokenizer import tokenizer_source

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "relu": "relu",
               "silu": "silu", "swish": "silu"}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def activation(hf: dict[str, Any], key: str, path: Path, default: str = "gelu") -> str:
    """Our name of the config's activation `key`; one line for one not implemented."""
    name = hf.get(key, default)
    if name not in ACTIVATIONS:
        raise HFImportError(f"{path}: {key} {name!r} is not implemented ({', '.join(ACTIVATIONS)} are)")
    return ACTIVATIONS[name]


def check_masked_lm(hf: dict[str, Any], path: Path, heads: tuple[str, ...]) -> bool:
    """Whether config.json's architectures name a class with a masked-LM head (of `heads`; none named: it has one);
    a folder without one (a sequence classifier, a bare encoder, ELECTRA's discriminator) opens for its maps only.
    One line for a decoder and for positions not implemented."""
    if hf.get("is_decoder") or hf.get("add_cross_attention"):
        raise HFImportError(f"{path}: is_decoder / add_cross_attention: a decoder is not implemented (the encoder "
                            "reading every token is)")
    kind = hf.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise HFImportError(f"{path}: position_embedding_type {kind!r} is not implemented (absolute is)")
    architectures = hf.get("architectures") or []
    return not architectures or any(name in heads for name in architectures)


def encoder_config(hf: dict[str, Any], path: Path, head: bool, **values: Any) -> ModelConfig:
    """An encoder-only `ModelConfig` with the fields every family shares, `values` (the family's names) and whether
    it has its masked-LM `head` (`check_masked_lm`)."""
    pad = hf.get("pad_token_id")
    pad = pad if isinstance(pad, int) and not isinstance(pad, bool) else 0
    fields = {"kind": "encoder", "decoder_layers": 0, "vocab_size": int(need(hf, "vocab_size", path)),
              "dropout": 0.0, "norm": "post", "positional": "learned", "share_embeddings": True,
              "scale_embeddings": False, "pad_id": pad, "bos_id": pad, "eos_id": pad, "unk_id": pad,
              "masked_lm_head": head, **values}
    return checked_config(path, **fields)


def encoder_tokenizer(folder: Path, hf: dict[str, Any], source: str | None = None, target: str | None = None
                      ) -> EncoderTokenizer:
    """The folder's tokenizer as transformers 5 builds it, with its mask token, whether it gives token type ids,
    and its decode setting (tokenizer_config.json's where transformers is not installed)."""
    if source or target:
        raise HFImportError(f"{argument('source_lang')} / {argument('target_lang')} choose a translation model's "
                            "pair; an encoder has none")
    data = tokenizer_source(folder)
    settings = tokenizer_settings(folder)
    mask, inputs = settings.get("mask_token"), settings.get("model_input_names")
    clean = bool(settings.get("clean_up_tokenization_spaces", False))
    try:
        import transformers

        built = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
        mask, inputs = built.mask_token, list(built.model_input_names)
        clean = bool(getattr(built, "clean_up_tokenization_spaces", clean))
    except ImportError:
        pass
    except Exception as err:  # any reason transformers gives: its first line names it
        raise HFImportError(f"{folder}: transformers cannot read this folder's tokenizer ({err})") from None
    if isinstance(mask, dict):  # an AddedToken as tokenizer_config.json writes it
        mask = mask.get("content")
    if not isinstance(mask, str):
        raise HFImportError(f"{folder}: its tokenizer has no mask token (a masked-language model's has one)")
    token_types = "token_type_ids" in (inputs or ["token_type_ids"])
    rules = EncoderTokenizer.rules_file(ids=hf.get("vocab_size", 0), mask_token=mask, token_types=token_types,
                                        clean_up_spaces=clean)
    try:
        return EncoderTokenizer.from_files({"tokenizer.json": data, EncoderTokenizer.MARKER: rules}, folder)
    except ValueError as err:
        raise HFImportError(str(err)) from None


def head_tied(state: dict[str, Tensor], output: str, embedding: str, path: Path) -> set[str]:
    """The output projection's stored matrix (`output`), where the checkpoint has one, checked equal to the token
    embeddings (the head is tied): returned to be ignored; one line where it differs."""
    if output not in state:
        return set()
    if state[output].shape != state[embedding].shape or not torch.equal(state[output], state[embedding]):
        raise HFImportError(f"{path}: {output} differs from {embedding}; an untied masked-LM head is not "
                            "implemented")
    return {output}


def conversion_lines(cfg: ModelConfig) -> list[str]:
    """How an encoder-only checkpoint maps onto the instrumented model, for the model card."""
    width = f", embeddings of width {cfg.embedding_size} projected to d_model" if cfg.embedding_size else ""
    positions = {"learned": "learned positions" + (" counted from the pad id" if cfg.pad_positions else ""),
                 "rope": f"RoPE (base {cfg.rope_base:g}; {cfg.windowed_rope_base:g} in the {len(cfg.windowed_layers)} "
                         f"layers that see the keys within {cfg.window_radius} on either side)",
                 "disentangled": f"disentangled attention ({', '.join(('c2c', *cfg.pos_att_type))}"
                                 + (f", {cfg.position_buckets} log buckets" if cfg.position_buckets else "") + ")"}
    return [f"- Encoder-only: {cfg.encoder_layers} {cfg.norm}-norm layers, {cfg.heads} heads, "
            f"{positions[cfg.positional]}"
            + (f", {cfg.type_vocab_size} token types" if cfg.type_vocab_size else ", no token types") + width
            + (f"; the masked-LM head (dense, {cfg.head_activation}, norm, the tied output projection)."
               if cfg.masked_lm_head else "; no masked-language-model head in the folder: its maps only (no "
               "fill-mask).")]


def import_encoder(family: Family, folder: Path, hf: dict[str, Any], out: Path, label: str,
                   read_weights: Callable[[Path], tuple[dict[str, Tensor], Path]], dtype: str = "fp32",
                   source_lang: str | None = None, target_lang: str | None = None) -> Path:
    """Import the encoder-only model of `folder` (config.json `hf`, of `family`) as the model directory `out`, its
    weights copied (`dtype`); `read_weights` the importer's reader of the folder's tensors."""
    path = folder / "config.json"
    cfg = family.model_config(hf, path, 0, None)
    tokenizer = family.tokenizer(folder, hf, source_lang, target_lang)
    if tokenizer.vocab_size != cfg.vocab_size:
        raise HFImportError(f"{folder / 'tokenizer.json'}: {tokenizer.vocab_size:,} ids in its tokenizer, but "
                            f"config.json says vocab_size {cfg.vocab_size:,}: a tokenizer of another model?")
    stored = sum(math.prod(shape) for shape in planned_model(cfg)[0].values()) * DTYPES[dtype].itemsize
    if stored > MAX_WEIGHTS_BYTES:
        raise HFImportError(f"{folder}: {stored / 1024**3:.2f} GiB of {dtype} weights, above the "
                            f"{MAX_WEIGHTS_BYTES / 1024**3:.0f} GiB weight-file limit")
    state, weights = read_weights(folder)
    model = MaskedLM.for_loading(cfg)
    model.load_state_dict(family.map_weights(state, cfg, weights), strict=True)
    model.eval()
    card = "\n".join([f"# {label} (imported)", "",
                      f"Imported from the Hugging Face model `{label}` ({hf.get('model_type')}, {weights.name}) by "
                      "`viz-model import`. Its own model card, training data and licence are the source model's.", "",
                      "## Conversion", "", *family.conversion_lines(cfg), "",
                      "- Exactness against transformers' eager attention (every map, the logits, fill-mask's top "
                      f"predictions) is tested in `tests/library/test_hf_import_encoders.py` on {family.tested}.", ""])
    return write_staged(out, lambda staging: save_model_dir(model, tokenizer, staging, card=card,
                                                            dtype=DTYPES[dtype]))
