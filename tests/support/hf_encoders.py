"""Small encoder-only Hugging Face folders built locally by transformers (random weights, a tokenizer trained here):
BERT and ELECTRA (WordPiece), RoBERTa (byte-level BPE), XLM-RoBERTa (Unigram), DistilBERT (WordPiece, no token
types), ALBERT (Unigram, factorized embeddings, one layer's weights shared), ModernBERT and DeBERTa-v2 / v3
(WordPiece)."""

from __future__ import annotations

from support.hf import WORDS_DE, WORDS_EN, sentences

TEXTS = sentences(WORDS_EN, 300, 0) + sentences(WORDS_DE, 300, 1)
SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "max_position_embeddings": 64}
CONFIGS = {  # config class, masked-LM class, tokenizer kind, settings
    "bert": ("BertConfig", "BertForMaskedLM", "wordpiece", {**SMALL}),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", "bpe", {**SMALL, "layer_norm_eps": 1e-5, "pad_token_id": 1,
                                                               "type_vocab_size": 1}),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForMaskedLM", "unigram", {**SMALL, "pad_token_id": 1,
                                                                            "type_vocab_size": 1,
                                                                            "hidden_act": "gelu_new"}),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM", "wordpiece", {
        "dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4, "max_position_embeddings": 64}),
    "electra": ("ElectraConfig", "ElectraForMaskedLM", "wordpiece", {**SMALL, "embedding_size": 16}),
    "albert": ("AlbertConfig", "AlbertForMaskedLM", "wordpiece", {**SMALL, "num_hidden_layers": 3,
                                                                  "embedding_size": 16, "num_hidden_groups": 1}),
    "modernbert": ("ModernBertConfig", "ModernBertForMaskedLM", "wordpiece", {  # layers 0 and 2 global, 1 local
        **SMALL, "num_hidden_layers": 3, "global_attn_every_n_layers": 2, "local_attention": 8,
        "global_rope_theta": 1000.0, "local_rope_theta": 50.0, "mlp_bias": True, "pad_token_id": 0,
        "bos_token_id": 2, "eos_token_id": 3, "cls_token_id": 2, "sep_token_id": 3}),
    "deberta-v3": ("DebertaV2Config", "DebertaV2ForMaskedLM", "wordpiece", {  # log buckets, shared keys, legacy head
        **SMALL, "relative_attention": True, "position_biased_input": False, "pos_att_type": ["p2c", "c2p"],
        "position_buckets": 8, "share_att_key": True, "norm_rel_ebd": "layer_norm", "embedding_size": 16}),
    "deberta-v2": ("DebertaV2Config", "DebertaV2ForMaskedLM", "wordpiece", {  # offsets clamped at 16, own projections
        **SMALL, "relative_attention": True, "pos_att_type": "p2c|c2p", "max_relative_positions": 16,
        "type_vocab_size": 2, "legacy": False, "conv_kernel_size": 3, "conv_act": "gelu"}),
}
SPECIALS = {"wordpiece": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            "bpe": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "unigram": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]}


VOCAB_SIZES = {"wordpiece": 200, "bpe": 300, "unigram": 150}


def trained_tokenizer(kind: str, texts: list[str] = TEXTS, vocab_size: int | None = None):
    """A tokenizers-library tokenizer of `kind` (wordpiece, bpe, unigram) trained on `texts` (`vocab_size` ids, else
    the kind's size of `VOCAB_SIZES`), with its family's post-processor: ``[CLS] A [SEP] B [SEP]`` or
    ``<s> A </s></s> B </s>``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials, size = SPECIALS[kind], vocab_size or VOCAB_SIZES[kind]
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=size, special_tokens=specials))
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls),
                                                                                        ("[SEP]", sep)])
        return tok
    if kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=size, special_tokens=specials,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    else:
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(texts, trainers.UnigramTrainer(vocab_size=size, special_tokens=specials,
                                                               unk_token="<unk>"))
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")), trim_offsets=False)
    return tok


def fast_tokenizer(name: str, kind: str, tok):
    """transformers' tokenizer of family `name` (one of CONFIGS) around `tok`, a tokenizer of `kind`: its special
    tokens named, token type ids where the family gives them."""
    import transformers

    names = dict(zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIALS[kind])
                 if kind == "wordpiece" else
                 zip(("bos_token", "pad_token", "eos_token", "unk_token", "mask_token"), SPECIALS[kind]))
    if kind != "wordpiece":
        names.update(cls_token="<s>", sep_token="</s>")
    typed = ("bert", "electra", "albert", "deberta-v3", "deberta-v2")
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if name in typed else [])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, model_input_names=inputs, **names)


def build_encoder_folder(root, name: str, seed: int = 0, **changes):
    """A saved folder of family `name` (one of CONFIGS; `changes` to its config): random weights (biases and norms
    too, so maps are far from uniform) and its tokenizer; returns it."""
    import torch
    import transformers

    config_class, model_class, kind, settings = CONFIGS[name]
    tok = trained_tokenizer(kind)
    tokenizer = fast_tokenizer(name, kind, tok)
    config = getattr(transformers, config_class)(vocab_size=tok.get_vocab_size(), **{**settings, **changes})
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config)
    with torch.no_grad():
        for param_name, p in model.named_parameters():
            if "embeddings" in param_name or param_name.endswith("weight") and p.dim() == 2:
                p.normal_(0, 0.3)
            elif param_name.endswith("bias"):
                p.normal_(0, 0.2)
            else:  # norms' gains
                p.normal_(1.0, 0.3)
    folder = root / name
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


SENTENCEPIECE = {  # the tokenizer class, its model file, the trainer's settings
    "albert": ("AlbertTokenizer", "spiece", {"model_type": "unigram", "pad_id": 0, "unk_id": 1, "bos_id": 2,
                                             "eos_id": 3, "pad_piece": "<pad>", "unk_piece": "<unk>",
                                             "bos_piece": "[CLS]", "eos_piece": "[SEP]",
                                             "user_defined_symbols": ["[MASK]"]}),
    "deberta-v3": ("DebertaV2Tokenizer", "spm", {"model_type": "unigram", "pad_id": 0, "unk_id": 3, "bos_id": 1,
                                               "eos_id": 2, "pad_piece": "[PAD]", "unk_piece": "[UNK]",
                                               "bos_piece": "[CLS]", "eos_piece": "[SEP]"}),
    "xlm-roberta": ("XLMRobertaTokenizer", "sentencepiece.bpe", {"model_type": "bpe", "unk_id": 0, "bos_id": 1,
                                                                 "eos_id": 2, "pad_id": -1}),
}


def build_sentencepiece_folder(root, name: str, seed: int = 0):
    """A folder of family `name` (one of SENTENCEPIECE) whose tokenizer is a SentencePiece model alone
    (``spiece.model``, ``sentencepiece.bpe.model``, as ALBERT's and XLM-R's hub folders publish it: transformers
    builds the tokenizer from it); returns it."""
    import json

    import sentencepiece as spm
    import torch
    import transformers

    tokenizer_class, prefix, settings = SENTENCEPIECE[name]
    folder = root / f"{name}-sentencepiece"
    folder.mkdir(parents=True)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS), model_prefix=str(folder / prefix), vocab_size=120,
                                   character_coverage=1.0, minloglevel=2, hard_vocab_limit=False, **settings)
    (folder / f"{prefix}.vocab").unlink()
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": tokenizer_class}))
    size = len(transformers.AutoTokenizer.from_pretrained(folder))
    config_class, model_class, _, config = CONFIGS[name]
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(vocab_size=size, **config))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    model.save_pretrained(folder)
    return folder
