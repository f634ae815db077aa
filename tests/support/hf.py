"""Small Hugging Face translation models built locally (random weights, SentencePiece models trained here)."""

from __future__ import annotations

import random

WORDS_EN = ["a", "man", "woman", "dog", "cat", "plays", "runs", "in", "the", "snow", "park", "house", "red", "blue",
            "small", "big", "old", "young", "reads", "book"]
WORDS_DE = ["ein", "mann", "frau", "hund", "katze", "spielt", "läuft", "im", "schnee", "park", "haus", "rot", "blau",
            "klein", "groß", "alt", "jung", "liest", "buch"]
ODD = ["Ünïcödé ☃ snow.", "CAPS AND numbers 123!", "emoji 🙂 and 中文 text", "tabs\tand  spaces", "ß ø å æ œ"]


def sentences(words: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))).capitalize() + rng.choice([".", "!", "?"])
            for _ in range(count)]


def train_spm(lines: list[str], path, **special_ids: int) -> None:
    """A unigram SentencePiece model of about 60 pieces at ``path.model`` (Marian's special ids unless given)."""
    import sentencepiece as spm

    ids = {"unk_id": 1, "bos_id": -1, "eos_id": 0, "pad_id": -1, **special_ids}
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(path), vocab_size=60,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2,
                                   hard_vocab_limit=False, **ids)


def randomise(model, scale: float = 0.3) -> None:
    """Weights larger than the default init, so the attention maps are far from uniform."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, scale)


def forced_outputs(model, hf_tok, imported, texts: list[str] | None = None):
    """Hugging Face's and our teacher-forced outputs, with every attention map, on `texts` (default 7 sentences, two
    with odd characters), each forced on a German sentence: pairs ``(ours, theirs)``."""
    import torch

    for text in texts or sentences(WORDS_EN, 5, 3) + ODD[:2]:
        src = hf_tok(text, return_tensors="pt").input_ids
        target = hf_tok(text_target=sentences(WORDS_DE, 1, len(text))[0], return_tensors="pt").input_ids
        tgt_in = torch.cat([torch.full((1, 1), imported.config.bos_id), target[:, :-1]], dim=1)
        with torch.no_grad():
            yield (imported.network(src, tgt_in, need_weights=True),
                   model(input_ids=src, decoder_input_ids=tgt_in, output_attentions=True))


def assert_same_maps(ours, theirs, cfg) -> None:
    """Every encoder, decoder and cross-attention map equal to 1e-5, one per layer."""
    import numpy as np

    for name in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        mine, other = getattr(ours, name), getattr(theirs, name)
        assert len(mine) == len(other) == (cfg.encoder_layers if name.startswith("encoder") else cfg.decoder_layers)
        for a, b in zip(mine, other):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def save_folder(model, tokenizer, folder, licence: str):
    """`model` (randomised) and `tokenizer` saved as Hugging Face saves them, with a README naming `licence`."""
    randomise(model)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "README.md").write_text(f"---\nlicense: {licence}\n---\n# tiny\n")
    return folder


def assert_same_ids(hf_tok, imported) -> None:
    """Source and target ids of 100 sentences (unknown characters included), and the pieces, equal theirs."""
    texts = sentences(WORDS_EN, 95, 7) + ODD
    for text in texts:
        assert imported.encode(text) == hf_tok(text).input_ids, text
        assert imported.tokenizer.encode_target(text) + [imported.config.eos_id] == \
            hf_tok(text_target=text).input_ids, text
    ids = hf_tok(texts[0]).input_ids
    assert imported.tokenizer.pieces(ids) == hf_tok.convert_ids_to_tokens(ids)


def assert_same_forced_outputs(model, hf_tok, imported, keep=None, texts: list[str] | None = None) -> list:
    """Teacher-forced logits equal theirs to 1e-4 (over the ids in `keep`, default all) and every attention map, on
    `texts` (default `forced_outputs`'); returns the ``(ours, theirs)`` pairs for further checks."""
    import numpy as np

    pairs = list(forced_outputs(model, hf_tok, imported, texts))
    for ours, theirs in pairs:
        mine, other = ours.logits.numpy(), theirs.logits.numpy()
        if keep is not None:
            mine, other = mine[..., keep], other[..., keep]
        np.testing.assert_allclose(mine, other, rtol=1e-4, atol=1e-4)
        assert_same_maps(ours, theirs, imported.config)
    return pairs


def failed_import(folder, tmp_path, capsys, change) -> str:
    """Import a copy of `folder` damaged by `change(copy)`: it must fail with exit 2 and one line and leave no
    output directory; returns the line."""
    import shutil

    from viz_model.cli.main import main

    copy = tmp_path / "broken"
    shutil.copytree(folder, copy)
    change(copy)
    assert main(["import", str(copy), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and not (tmp_path / "out").exists(), err
    return err


def import_folder(folder, tmp_path_factory, name: str, *options: str):
    """`viz-model import` of `folder` (with `options`, such as --source-lang en) into a fresh assets directory,
    loaded with the full-precision search."""
    import viz_model
    from viz_model.cli.main import main

    out = tmp_path_factory.mktemp("assets") / name
    assert main(["import", str(folder), "--out", str(out), *options]) == 0
    return viz_model.load(out, device="cpu", precision="fp32")


def build_marian_folder(root):
    """A random Marian model of tiny size in `root`, saved as Hugging Face saves one (model, config, tokenizer
    files); returns its folder."""
    import json

    import sentencepiece as spm
    import torch
    import transformers

    train_spm(sentences(WORDS_EN, 300, 0), root / "source")
    train_spm(sentences(WORDS_DE, 300, 1), root / "target")
    pieces: dict[str, int] = {"</s>": 0, "<unk>": 1}
    for side in ("source", "target"):
        sp = spm.SentencePieceProcessor(model_file=str(root / f"{side}.model"))
        for i in range(sp.get_piece_size()):
            pieces.setdefault(sp.id_to_piece(i), len(pieces))
    pieces["<pad>"] = len(pieces)
    (root / "vocab.json").write_text(json.dumps(pieces))
    tokenizer = transformers.MarianTokenizer(source_spm=str(root / "source.model"),
                                             target_spm=str(root / "target.model"), vocab=str(root / "vocab.json"))
    pad = pieces["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(pieces), d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=96,
        activation_function="swish", scale_embedding=True, pad_token_id=pad, decoder_start_token_id=pad,
        eos_token_id=0, forced_eos_token_id=None, dropout=0.0)
    model = transformers.MarianMTModel(config)
    folder = save_folder(model, tokenizer, root / "opus-mt-tiny", "cc-by-4.0")  # randomises the weights
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1.0)
    model.save_pretrained(folder)  # with the larger output bias too
    return folder


def build_m2m100_folder(root, positions: int = 96):
    """A random M2M100 model of tiny size with fairseq's id layout (<s> <pad> </s> <unk>, pieces, language
    codes, made-up words) and `positions` positions, saved as Hugging Face saves one; returns its folder."""
    import json

    import sentencepiece as spm
    import transformers

    from viz_model.tokenization.pretrained import M2M100_LANGUAGE_CODES

    made_up_words = 8  # ids M2M100 reserves after its language codes
    train_spm(sentences(WORDS_EN, 300, 0) + sentences(WORDS_DE, 300, 1), root / "spm", unk_id=3, bos_id=0,
              eos_id=2, pad_id=1)
    sp = spm.SentencePieceProcessor(model_file=str(root / "spm.model"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (root / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = transformers.M2M100Tokenizer(vocab_file=str(root / "vocab.json"), spm_file=str(root / "spm.model"),
                                             src_lang="en", tgt_lang="de")
    config = transformers.M2M100Config(
        vocab_size=len(vocab) + len(M2M100_LANGUAGE_CODES["m2m100"]) + made_up_words, d_model=32, encoder_layers=2,
        decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=positions, activation_function="relu", dropout=0.0,
        encoder_layerdrop=0.0, decoder_layerdrop=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2)
    model = transformers.M2M100ForConditionalGeneration(config)
    return save_folder(model, tokenizer, root / "m2m100-tiny", "mit")


def word_for_word(text: str) -> str:
    """The German of a `sentences(WORDS_EN, ...)` sentence, word for word: what a tiny model can learn fast."""
    table = dict(zip(WORDS_EN, WORDS_DE + ["das"]))
    words = [table.get(w, w) for w in text[:-1].lower().split()]
    return " ".join(words).capitalize() + text[-1]


def fit(model, tokenizer, steps: int, seed: int = 0, lr: float = 3e-3) -> None:
    """Train a Hugging Face translation model in place for `steps` Adam steps on word-for-word translations of
    random sentences, so that it ends its outputs (random weights never emit </s>)."""
    import torch

    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    model.train()
    for step in range(steps):
        texts = sentences(WORDS_EN, 16, 1000 * seed + step)
        batch = tokenizer(texts, text_target=[word_for_word(t) for t in texts], return_tensors="pt", padding=True)
        batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def eager_model(model_class: str, folder):
    """transformers' `model_class` (a name, e.g. "BertForMaskedLM") loaded from `folder` with eager attention, in eval
    mode, and the folder's tokenizer: the reference the import tests compare with."""
    import transformers

    model = getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager")
    return model.eval(), transformers.AutoTokenizer.from_pretrained(folder)


def imported_model(folder, root):
    """`folder` imported with ``viz-model import`` into `root`, loaded on the CPU."""
    import viz_model
    from viz_model.cli.main import main

    out = root / folder.name
    assert main(["import", str(folder), "--out", str(out)]) == 0
    return viz_model.load(out, device="cpu")
