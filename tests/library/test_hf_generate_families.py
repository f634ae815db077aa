"""Imported T5, mT5, BART, mBART-50 and original mBART models translate as ``generate`` does (issue 45), on fitted
weights.

Each family's small model is fitted here to translate word for word (so that it ends its outputs: random weights
never emit </s>), saved with a generation config of the kind its hub models have, imported, and its default search
(transformers' rule with the folder's settings, full precision) and greedy search compared with ``generate`` on 100
sentences each: every output identical, and the translated text is ``batch_decode``'s (special tokens skipped).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.fit_cache import cache_dir, cached_folder  # noqa: E402
from support.hf import WORDS_EN, fit, import_folder, sentences  # noqa: E402
from support.hf_batches import translations  # noqa: E402
from support.hf_families import (  # noqa: E402
    T5_PREFIX,
    Prefixed,
    build_bart_folder,
    build_mbart50_folder,
    build_mt5_folder,
    build_original_mbart_folder,
    build_t5_folder,
)

pytestmark = pytest.mark.slow

T5_START = {"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}
MBART_IDS = {"bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1}  # the start: config.json's (a language code)
BART_IDS = {**MBART_IDS, "decoder_start_token_id": 2}
FAMILIES = {  # builder, transformers' class, generation config (of the kind the family's hub folders have)
    "t5-v1.0": (lambda root: build_t5_folder(root, "1.0"), "T5ForConditionalGeneration",
                {**T5_START, "num_beams": 4, "max_length": 60, "early_stopping": True}),
    "t5-v1.1": (lambda root: build_t5_folder(root, "1.1"), "T5ForConditionalGeneration",
                {**T5_START, "num_beams": 3, "max_new_tokens": 40, "length_penalty": 0.8}),
    "mt5": (build_mt5_folder, "MT5ForConditionalGeneration", {**T5_START, "num_beams": 4, "max_length": 50}),
    "bart": (build_bart_folder, "BartForConditionalGeneration",
             {**BART_IDS, "num_beams": 4, "max_length": 60, "min_length": 3, "early_stopping": True,
              "length_penalty": 2.0, "no_repeat_ngram_size": 3, "forced_bos_token_id": 0, "forced_eos_token_id": 2}),
    "mbart50": (build_mbart50_folder, "MBartForConditionalGeneration",
                {**BART_IDS, "num_beams": 5, "max_length": 60, "early_stopping": True, "forced_eos_token_id": 2}),
    "mbart": (build_original_mbart_folder, "MBartForConditionalGeneration",  # mbart-large-en-ro's kind
              {**MBART_IDS, "num_beams": 5, "max_length": 60, "forced_eos_token_id": 2}),
}
# what makes a fitted folder besides its family's name (its key in the cache, support.fit_cache): the code that fits it
FIT_CODE = ("support/hf.py", "support/hf_families.py", "library/test_hf_generate_families.py")


def fit_family(family: str, staging: Path) -> None:
    """`family`'s folder, fitted for 300 steps from transformers' own initialisation, with a generation config of the
    kind its hub folders have, written into `staging`."""
    build, name, generation = FAMILIES[family]
    with tempfile.TemporaryDirectory() as root:
        folder = build(Path(root))
        config = getattr(transformers, name).from_pretrained(folder).config
        torch.manual_seed(0)
        model = getattr(transformers, name)(config)  # transformers' own initialisation fits in a few hundred steps
        if family in ("t5-v1.1", "mt5"):  # the head its own matrix again, as the folder's is
            model.lm_head.weight = torch.nn.Parameter(model.shared.weight.detach() * 0.5)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        fit(model, Prefixed(tokenizer) if family.startswith("t5") else tokenizer, steps=300)
        model.save_pretrained(folder)
        generation = {"decoder_start_token_id": config.decoder_start_token_id, **generation}
        (folder / "generation_config.json").write_text(json.dumps(generation))
        shutil.copytree(folder, staging, dirs_exist_ok=True)


@pytest.fixture(scope="module", params=FAMILIES)
def fitted(request, tmp_path_factory):
    """(transformers' model as reloaded from the folder, its tokenizer, the imported model, the source prefix,
    what generate is told beside the folder's settings) of one family, fitted once (`fit_family`, cached in pytest's
    cache folder)."""
    family = request.param
    folder = cached_folder(cache_dir(request, tmp_path_factory, "fitted-translators"), family, [family],
                           lambda staging: fit_family(family, staging), code=FIT_CODE)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = getattr(transformers, FAMILIES[family][1]).from_pretrained(folder).eval()  # with that generation config
    imported = import_folder(folder, tmp_path_factory, folder.name)
    extra = {"forced_bos_token_id": tokenizer.convert_tokens_to_ids("de_DE")} if family == "mbart50" else {}
    return model, tokenizer, imported, T5_PREFIX if family.startswith("t5") else "", extra


def test_beam_search_with_the_folders_settings_equals_generate_on_100_sentences(fitted):
    model, tokenizer, imported, prefix, extra = fitted
    texts = sentences(WORDS_EN, 100, 2024)
    assert imported.generation.rule == "transformers" and imported.search_precision == "fp32"
    assert imported.config.tied_head == (model.lm_head.weight is model.get_input_embeddings().weight)
    assert imported.search_settings().beam == model.generation_config.num_beams > 1
    theirs = translations(model, tokenizer, texts, imported.config.eos_id, prefix, **extra)
    assert sum(ids[-1] == imported.config.eos_id for ids in theirs) >= 80  # fitted: it ends its translations
    ours = [imported.trace(text).output_ids for text in texts]
    different = [(t, a, b) for t, a, b in zip(texts, ours, theirs) if a != b]
    assert not different, different[:3]
    translated = imported.translate(texts[:20])  # one batched search for both comparisons
    assert translated == [imported.tokenizer.decode(ids) for ids in theirs[:20]]
    assert translated == tokenizer.batch_decode(theirs[:20], skip_special_tokens=True)


def test_greedy_search_equals_generate_on_100_sentences(fitted):
    model, tokenizer, imported, prefix, extra = fitted
    texts = sentences(WORDS_EN, 100, 2025)
    theirs = translations(model, tokenizer, texts, imported.config.eos_id, prefix, num_beams=1, **extra)
    assert [imported.trace(text, beam=1).output_ids for text in texts] == theirs
