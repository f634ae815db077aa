"""Small T5, mT5, BART and mBART folders built locally by transformers (random weights, tokenizers trained here),
saved as transformers 5 saves them: model.safetensors, config.json, generation_config.json, tokenizer.json."""

from __future__ import annotations

import json

from support.hf import ODD as ODD_TEXTS
from support.hf import WORDS_DE, WORDS_EN, randomise, sentences, word_for_word

T5_PREFIX = "translate English to German: "
TEXTS = sentences(WORDS_EN, 300, 0) + sentences(WORDS_DE, 300, 1) + [T5_PREFIX + s for s in sentences(WORDS_EN, 50, 2)]
# mT5's vocabulary is multilingual: words of other scripts beside the English and German ones
WORDS_MANY = ["мужчина", "читает", "книгу", "собака", "άνθρωπος", "σκύλος", "男人", "读书", "公园", "犬", "公園で",
              "रहा", "कुत्ता", "الكلب", "في"]
TEXTS_MANY = TEXTS + sentences(WORDS_MANY, 300, 3)


def spm_vocab(root, texts: list[str] = TEXTS, pieces: int = 80, **ids: int) -> dict:
    """A unigram SentencePiece model of about `pieces` pieces trained on `texts` (the test words), extracted as
    transformers' converters extract one: its vocabulary (pieces and scores) and normalizer."""
    import sentencepiece as spm
    from transformers.convert_slow_tokenizer import SentencePieceExtractor

    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=str(root / "spm"), vocab_size=pieces,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2,
                                   hard_vocab_limit=False, **ids)
    extractor = SentencePieceExtractor(str(root / "spm.model"))
    return {"vocab": extractor.extract(None)["vocab"],
            "_spm_precompiled_charsmap": extractor.proto.normalizer_spec.precompiled_charsmap}


def save(model, tokenizer, folder, generation: dict, licence: str = "apache-2.0", **config_changes):
    """`model` randomised and saved with `tokenizer`, its generation_config.json replaced by `generation` and its
    config.json changed by `config_changes` (what a hub folder of the family states)."""
    randomise(model)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps(generation))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | config_changes))
    (folder / "README.md").write_text(f"---\nlicense: {licence}\n---\n# tiny\n")
    return folder


def build_t5_folder(root, version: str = "1.0"):
    """A random T5 of tiny size: v1.0 (ReLU, the head tied and the decoder's output rescaled, the task prefix of one
    translation task) or v1.1 (gated GELU, heads of d_kv 12 (4 x 12 != d_model 32), a head of its own in the
    checkpoint, as hub v1.1 checkpoints have it); the model's vocabulary 6 ids larger than the tokenizer's."""
    import transformers

    tokenizer = transformers.T5Tokenizer(**spm_vocab(root, pad_id=0, eos_id=1, unk_id=2, bos_id=-1), extra_ids=10)
    v11 = version == "1.1"
    config = transformers.T5Config(
        vocab_size=len(tokenizer) + 6, d_model=32, d_kv=12 if v11 else 8, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=20, dropout_rate=0.0,
        feed_forward_proj="gated-gelu" if v11 else "relu", decoder_start_token_id=0)
    folder = save(transformers.T5ForConditionalGeneration(config), tokenizer, root / f"t5-v{version}-tiny",
                  {"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0},
                  task_specific_params={"summarization": {"prefix": "summarize: "},
                                        "translation_en_to_de": {"prefix": T5_PREFIX}})
    if v11:  # an untied checkpoint as v1.1's are: the head its own matrix, no rescale
        _own_head(folder)
    return folder


def build_mt5_folder(root):
    """A random mT5 of tiny size as hub mT5 folders are: v1.1's architecture (gated GELU, heads of d_kv 12), the
    head its own matrix, no task prefix (pre-trained only), a SentencePiece vocabulary of several scripts with no
    extra ids; the model's vocabulary 12 ids larger than the tokenizer's. As many decoder layers as encoder ones:
    transformers 5.24's generate fails on an MT5 model with more (its cache has num_layers layers)."""
    import transformers

    tokenizer = transformers.T5Tokenizer(**spm_vocab(root, TEXTS_MANY, 160, pad_id=0, eos_id=1, unk_id=2, bos_id=-1),
                                         extra_ids=0)
    config = transformers.MT5Config(
        vocab_size=len(tokenizer) + 12, d_model=32, d_kv=12, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=20, dropout_rate=0.0,
        feed_forward_proj="gated-gelu", decoder_start_token_id=0)
    folder = save(transformers.MT5ForConditionalGeneration(config), tokenizer, root / "mt5-tiny",
                  {"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}, tokenizer_class="T5Tokenizer")
    _own_head(folder)
    return folder


def _own_head(folder) -> None:
    """The checkpoint's head made a matrix of its own and its config.json's tie_word_embeddings false, as hub T5
    v1.1 and mT5 folders have them."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    torch.manual_seed(1)
    tensors["lm_head.weight"] = torch.randn_like(tensors["shared.weight"]) * 0.3
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config.pop("scale_decoder_outputs", None)
    (folder / "config.json").write_text(json.dumps(config | {"tie_word_embeddings": False}))


def build_bart_folder(root, generation: dict | None = None):
    """A random BART of tiny size (post-norm, learned positions from row 2, embedding norm, not scaled) with a
    byte-level BPE tokenizer trained here; `<s>` forced first, as bart-large's generation config does."""
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXTS, vocab_size=300, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    merges = [tuple(m) for m in json.loads(bpe._tokenizer.to_str())["model"]["merges"]]
    tokenizer = transformers.BartTokenizer(vocab=bpe.get_vocab(), merges=merges)
    config = transformers.BartConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128, dropout=0.0,
        forced_bos_token_id=0)
    model = transformers.BartForConditionalGeneration(config)
    generation = generation or {"bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2,
                                "forced_bos_token_id": 0, "forced_eos_token_id": 2, "pad_token_id": 1}
    folder = save(model, tokenizer, root / "bart-tiny", generation)
    _bias(model, folder)
    return folder


MBART_SIZE = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4,
              "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
              "max_position_embeddings": 128, "dropout": 0.0, "scale_embedding": True}


def build_mbart50_folder(root, generation: dict | None = None):
    """A random mBART-50 of tiny size (pre-norm with final norms, scaled embeddings, the 52 language codes) with a
    unigram tokenizer trained here, English to German."""
    import transformers

    tokenizer = transformers.MBart50Tokenizer(**spm_vocab(root), src_lang="en_XX", tgt_lang="de_DE")
    config = transformers.MBartConfig(vocab_size=len(tokenizer), decoder_start_token_id=2, **MBART_SIZE)
    model = transformers.MBartForConditionalGeneration(config)
    generation = generation or {"bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2,
                                "forced_eos_token_id": 2, "pad_token_id": 1}
    folder = save(model, tokenizer, root / "mbart50-tiny", generation, licence="mit")
    _bias(model, folder)
    return folder


def build_original_mbart_folder(root):
    """A random original mBART of tiny size as mbart-large-en-ro's folder is: its MBartTokenizer puts the source's
    language code after </s>, the decoder starts from the target's (ro_RO), nothing is forced first; fairseq's ids
    (<s> <pad> </s> <unk>), which MBartTokenizer takes as they come."""
    import transformers

    fairseq = spm_vocab(root, bos_id=0, pad_id=1, eos_id=2, unk_id=3)
    tokenizer = transformers.MBartTokenizer(**fairseq, src_lang="en_XX", tgt_lang="ro_RO")
    start = tokenizer.convert_tokens_to_ids("ro_RO")
    config = transformers.MBartConfig(vocab_size=len(tokenizer), decoder_start_token_id=start, **MBART_SIZE)
    model = transformers.MBartForConditionalGeneration(config)
    generation = {"bos_token_id": 0, "decoder_start_token_id": start, "eos_token_id": 2, "pad_token_id": 1}
    folder = save(model, tokenizer, root / "mbart-tiny", generation, licence="mit")
    _bias(model, folder)
    return folder


def _bias(model, folder) -> None:
    """A final_logits_bias far from zero, saved with the weights (transformers keeps it at zero at first)."""
    import torch

    generation = (folder / "generation_config.json").read_text()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1.0)
    model.save_pretrained(folder)
    (folder / "generation_config.json").write_text(generation)


class Prefixed:
    """A tokenizer whose sources get T5's task prefix, as `fit` calls a tokenizer (to fit T5 as it translates)."""

    def __init__(self, tokenizer, prefix: str = T5_PREFIX) -> None:
        self.tokenizer, self.prefix, self.pad_token_id = tokenizer, prefix, tokenizer.pad_token_id

    def __call__(self, texts, **kwargs):
        return self.tokenizer([self.prefix + t for t in texts], **kwargs)


def targets(texts: list[str]) -> list[str]:
    """The word-for-word German of `texts` (what `fit` teaches)."""
    return [word_for_word(t) for t in texts]


def assert_same_ids(hf_tok, imported, prefix: str = "", texts: list[str] | None = None) -> None:
    """Source ids (with the task prefix) and target ids of `texts` (default: 100 sentences, unknown characters
    included) equal transformers'; so does the text of every target without <unk> (ours shows <unk> as ⁇, theirs
    drops it). The original mBART's targets end in the target's code, which its decoder starts from instead."""
    after = [] if imported.tokenizer.target_start is None else [imported.tokenizer.target_start]
    for text in texts or sentences(WORDS_EN, 95, 7) + ODD_TEXTS:
        assert imported.encode(text) == hf_tok(prefix + text).input_ids, text
        target = hf_tok(text_target=text).input_ids
        assert imported.tokenizer.encode_target(text) + [imported.config.eos_id] + after == target, text
        if hf_tok.unk_token_id not in target:
            assert imported.tokenizer.decode(target) == hf_tok.decode(target, skip_special_tokens=True), text


def assert_greedy_equals_generate(model, hf_tok, imported, prefix: str = "", **settings) -> None:
    """Greedy search (on random weights: every output runs to the length limit) gives generate's ids."""
    import torch

    for text in sentences(WORDS_EN, 10, 11):
        ours = imported.trace(text, beam=1)
        with torch.no_grad():
            theirs = model.generate(hf_tok(prefix + text, return_tensors="pt").input_ids, num_beams=1,
                                    do_sample=False, max_new_tokens=ours.settings["max_output_length"], **settings)
        assert ours.output_ids == theirs[0, 1:].tolist(), text
