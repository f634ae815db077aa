"""Import a transformers model already in memory: saved as its own folder would be, then imported from there, so
that it behaves exactly as that folder imported with ``viz-model import``."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from .common import HFImportError
from .importer import FAMILIES, check_dtype, import_model

# the transformers class of each importable model_type (NLLB is an M2M100 model)
CLASSES = {"marian": "MarianMTModel", "m2m_100": "M2M100ForConditionalGeneration",
           "t5": "T5ForConditionalGeneration", "mt5": "MT5ForConditionalGeneration",
           "bart": "BartForConditionalGeneration",
           "mbart": "MBartForConditionalGeneration", "gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM",
           "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
           "gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM",
           "gemma3_text": "Gemma3ForCausalLM", "bloom": "BloomForCausalLM", "bert": "BertForMaskedLM",
           "roberta": "RobertaForMaskedLM", "xlm-roberta": "XLMRobertaForMaskedLM",
           "distilbert": "DistilBertForMaskedLM", "electra": "ElectraForMaskedLM", "albert": "AlbertForMaskedLM",
           "modernbert": "ModernBertForMaskedLM", "deberta-v2": "DebertaV2ForMaskedLM"}
# the research families' language models (issue 60)
CLASSES.update({"gpt_neox": "GPTNeoXForCausalLM", "gpt_neo": "GPTNeoForCausalLM", "opt": "OPTForCausalLM",
                "phi": "PhiForCausalLM", "olmo2": "Olmo2ForCausalLM",
                "mixtral": "MixtralForCausalLM", "gpt_oss": "GptOssForCausalLM", "phi3": "Phi3ForCausalLM"})
assert CLASSES.keys() == FAMILIES.keys()
SUPPORTED = ", ".join(CLASSES.values())
HF_EXTRA = 'pip install "viz-model[hf]"'


def check_loaded(model: Any, tokenizer: Any) -> str:
    """The model_type of `model` when it is a transformers translation model of a family this project imports and
    `tokenizer` a transformers tokenizer; else `HFImportError` in one line naming the supported classes."""
    try:
        import transformers
    except ImportError:
        raise HFImportError(f"transformers is not installed: {HF_EXTRA}") from None
    if not isinstance(model, transformers.PreTrainedModel):
        raise HFImportError(f"{type(model).__name__}: not a transformers model (give one of {SUPPORTED}, with its "
                            "tokenizer)")
    kind = getattr(model.config, "model_type", None)
    if kind not in CLASSES or not isinstance(model, getattr(transformers, CLASSES[kind])):
        raise HFImportError(f"{type(model).__name__} ({kind}): not a class this project can import; supported: "
                            f"{SUPPORTED}")
    if not isinstance(tokenizer, transformers.PreTrainedTokenizerBase):
        raise HFImportError(f"{type(tokenizer).__name__}: not a transformers tokenizer (give the model's own, e.g. "
                            "AutoTokenizer.from_pretrained of its folder or hub id)")
    return kind


def import_loaded(model: Any, tokenizer: Any, parent: Path, source_lang: str | None = None,
                  target_lang: str | None = None, dtype: str = "fp32") -> Path:
    """Import `model` and `tokenizer` (checked by `check_loaded`, and `dtype`, before anything is written) as a model
    directory in `parent`, named as the model's folder or hub id; the saved folder is removed afterwards."""
    check_dtype(dtype)
    kind = check_loaded(model, tokenizer)
    label = str(getattr(model, "name_or_path", "") or kind)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(label).name).lstrip(".") or kind
    with tempfile.TemporaryDirectory(prefix="viz-model-hf.") as tmp:
        folder = Path(tmp) / name
        try:
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
        except Exception as err:  # a model transformers cannot save (quantized, offloaded): one line
            raise HFImportError(f"{type(model).__name__}: could not be saved for import "
                                f"({type(err).__name__}: {err})") from None
        # its own weights file: the saved folder is removed on return, so nothing may be read from it later
        return import_model(str(folder), parent / name, source_lang, target_lang, dtype, label=label, copy=True)
