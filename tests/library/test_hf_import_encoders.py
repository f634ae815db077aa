"""Hugging Face encoder-only models open exactly as the encoder kind (issue 59): BERT (WordPiece, token types),
RoBERTa (byte-level BPE, positions from the pad id), XLM-RoBERTa (Unigram, tanh GELU in the layers, erf in the head),
DistilBERT (no token types, its fixed epsilon), ELECTRA's generator (narrower embeddings projected), ALBERT (one
layer's weights shared by three depths, factorized embeddings), ModernBERT (global and local layers, two RoPE
bases), DeBERTa-v3 and v2 (disentangled attention: log buckets, shared or separate position projections, both heads,
v2's convolution);
ALBERT and XLM-R folders with their SentencePiece model alone.
Small random models built here by transformers, imported with ``viz-model import``; fp32 on the CPU: every attention
map within 1e-5 of transformers' eager attention, logits within 1e-4, token ids and token types equal to transformers'
tokenizer's, fill-mask's top-k tokens equal to transformers' fill-mask pipeline's."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import WORDS_EN, eager_model, imported_model, sentences  # noqa: E402
from support.hf_encoders import CONFIGS, build_encoder_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.hf.importer import HFImportError, import_model  # noqa: E402
from viz_model.kinds.encoder import EncoderModel  # noqa: E402
from viz_model.nn.model import HeadMask  # noqa: E402

MAP_TOLERANCE, LOGIT_TOLERANCE, PROBABILITY_TOLERANCE = 1e-5, 1e-4, 1e-5


def masked(texts: list[str], mask: str) -> list[str]:
    """Each text with one of its words (a different one each) replaced by the mask token, and one with two."""
    out = []
    for i, text in enumerate(texts):
        words = text.split()
        words[i % len(words)] = mask
        out.append(" ".join(words))
    out.append(f"{mask} red dog {mask} in the park.")
    return out


@pytest.fixture(scope="module", params=list(CONFIGS))
def family(request):
    return request.param


@pytest.fixture(scope="module")
def folder(family, tmp_path_factory):
    return build_encoder_folder(tmp_path_factory.mktemp("hf"), family)


@pytest.fixture(scope="module")
def hf(family, folder):
    return eager_model(CONFIGS[family][1], folder)


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory):
    return imported_model(folder, tmp_path_factory.mktemp("ours"))


@pytest.fixture(scope="module")
def texts(hf):
    return masked(sentences(WORDS_EN, 6, 11), hf[1].mask_token)


PAIRS = [("A man runs in the snow.", "The old dog reads a book!"), ("big house", "small cat plays")]


def test_load_returns_an_encoder_of_the_encoder_kind(imported, hf):
    assert isinstance(imported, EncoderModel)
    assert imported.kind == "encoder" and imported.attention_kinds == ("encoder",)
    assert imported.num_layers("encoder") == len(hf[0](**hf[1]("a dog", return_tensors="pt"),
                                                       output_attentions=True).attentions)
    with pytest.raises(ValueError, match="has no decoder attention"):
        imported.num_layers("decoder")
    assert imported.mask_token == hf[1].mask_token


@pytest.mark.parametrize("family", ["albert"], indirect=True)
def test_albert_runs_one_stored_layer_at_every_depth_with_maps_of_its_own(imported, family):
    assert len(imported.network.layers) == 1 and imported.config.encoder_layers == 3
    assert all(imported.network.layer(depth) is imported.network.layers[0] for depth in range(3))
    maps = imported.trace(f"a dog {imported.mask_token} in the snow").encoder_attentions
    assert len(maps) == 3 and not np.allclose(maps[0], maps[1]) and not np.allclose(maps[1], maps[2])


def test_ids_and_token_types_equal_transformers(hf, imported, texts):
    tokenizer = hf[1]
    for text, pair in [(t, None) for t in texts] + PAIRS:
        theirs = tokenizer(text, pair)
        encoded = imported.encoded(text, pair)
        assert encoded.ids == theirs["input_ids"], (text, pair)
        types = theirs.get("token_type_ids", [0] * len(encoded.ids))
        assert encoded.type_ids == types, (text, pair)


def test_every_map_and_the_logits_equal_transformers_eager(hf, imported, texts):
    model, tokenizer = hf
    worst_map = worst_logit = 0.0
    for text, pair in [(t, None) for t in texts[:4]] + PAIRS:
        inputs = tokenizer(text, pair, return_tensors="pt")
        with torch.no_grad():
            theirs = model(**inputs, output_attentions=True)
        trace = imported.trace(text, pair)
        assert len(trace.encoder_attentions) == len(theirs.attentions) == imported.config.encoder_layers
        for ours, other in zip(trace.encoder_attentions, theirs.attentions):
            assert ours.shape == tuple(other[0].shape)
            worst_map = max(worst_map, float(np.abs(ours - other[0].numpy()).max()))
        encoded = imported.encoded(text, pair)
        with torch.no_grad():
            logits = imported.forced_pass(encoded.ids, encoded.type_ids).logits
        worst_logit = max(worst_logit, float((logits - theirs.logits).abs().max()))
    assert worst_map < MAP_TOLERANCE and worst_logit < LOGIT_TOLERANCE, (worst_map, worst_logit)


def test_fill_mask_equals_the_pipeline(hf, imported, texts):
    model, tokenizer = hf
    pipe = transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer, device="cpu")
    for text in texts:
        theirs = pipe(text, top_k=5)
        theirs = theirs if isinstance(theirs[0], list) else [theirs]
        ours = imported.fill_mask(text, top_k=5)
        assert [[p["token_str"] for p in row] for row in theirs] == [[t for t, _ in row] for row in ours], text
        for row, mine in zip(theirs, ours):
            assert np.allclose([p["score"] for p in row], [q for _, q in mine], atol=PROBABILITY_TOLERANCE), text


def test_the_trace_holds_the_tokens_the_types_and_the_predictions(imported, hf):
    mask = hf[1].mask_token
    text, pair = f"A man {mask} in the snow.", "The old dog reads a book!"
    trace = imported.trace(text, pair, top_k=3)
    encoded = imported.encoded(text, pair)
    assert trace.source_ids == encoded.ids and trace.source_tokens == imported.pieces(encoded.ids)
    assert trace.settings["type_ids"] == encoded.type_ids and trace.settings["text_pair"] == pair
    assert trace.num_layers == {"encoder": imported.config.encoder_layers, "decoder": 0, "cross": 0}
    assert trace.encoder_mask.all() and trace.steps == [] and trace.target_tokens == []
    (found,) = trace.settings["predictions"]
    assert found["position"] == encoded.ids.index(imported.tokenizer.mask_id)
    filled = imported.fill_mask(text, 3, text_pair=pair)[0]
    assert found["tokens"] == [t for t, _ in filled]
    assert found["probabilities"] == pytest.approx([p for _, p in filled], abs=1e-6)
    for layer in trace.encoder_attentions:
        assert np.allclose(layer.sum(-1), 1.0, atol=1e-5)
    assert trace.source_positional.shape == trace.source_embeddings.shape == (len(encoded.ids),
                                                                             imported.embeddings([0]).shape[-1])


def test_a_head_mask_switches_heads_off_as_transformers_head_mask_would(imported, hf, texts):
    mask = torch.ones(imported.config.encoder_layers, imported.num_heads)
    mask[0, 1] = 0.0
    text = texts[0]
    plain, ablated = imported.fill_mask(text), imported.fill_mask(text, head_mask=HeadMask(encoder=mask))
    assert plain != ablated
    trace = imported.trace(text, head_mask=HeadMask(encoder=torch.ones_like(mask)))
    assert np.allclose(trace.encoder_attentions[0], imported.trace(text).encoder_attentions[0])
    with pytest.raises(ValueError, match="no decoder or cross heads"):
        imported.fill_mask(text, head_mask=HeadMask(decoder=mask))


def test_sequence_log_probs_score_the_mask_positions(imported, hf):
    mask = hf[1].mask_token
    text = f"A {mask} runs in the {mask}."
    ids = imported.encode(text)
    chosen = [found["ids"][1] for found in imported.trace(text).settings["predictions"]]  # the second best of each
    log_p = imported.sequence_log_probs([ids], [chosen])
    with torch.no_grad():
        logits = imported.forced_pass(ids).logits[0, imported.mask_positions(ids)]
    expected = torch.log_softmax(logits, -1)[torch.arange(2), torch.tensor(chosen)].sum()
    assert log_p[0] == pytest.approx(float(expected), abs=1e-5)
    with pytest.raises(ValueError, match="one id per mask token"):
        imported.sequence_log_probs([ids], [chosen[:1]])


def test_a_pair_longer_than_the_positions_names_both_lengths_and_the_limit(imported, hf):
    text, pair = "the dog " * 20, "a cat runs " * 20
    theirs = hf[1](text, pair)["input_ids"]
    first, second = (len(hf[1](part, add_special_tokens=False)["input_ids"]) for part in (text, pair))
    with pytest.raises(ValueError) as err:
        imported.trace(text, pair)
    assert str(err.value) == (f"the pair gives {len(theirs)} tokens (the text {first}, text_pair {second}, "
                              f"{len(theirs) - first - second} special); this model reads at most "
                              f"{imported.network.longest} (max_position_embeddings)")


def test_bad_input_gets_one_line(imported, family):
    for call, said in [(lambda: imported.fill_mask("a man runs in the snow"), "no mask token"),
                       (lambda: imported.fill_mask(""), "empty"),
                       (lambda: imported.fill_mask(f"a {imported.mask_token}", top_k=0), "top_k"),
                       (lambda: imported.trace("the dog " * 30, "a cat " * 30),
                        r"the pair gives \d+ tokens \(the text \d+, text_pair \d+, \d special\); this model reads "
                        rf"at most {imported.network.longest} \(max_position_embeddings\)"),
                       (lambda: imported.trace("a dog", forced_ids=[1]), "no output to force")]:
        with pytest.raises(ValueError, match=said) as err:
            call()
        assert "\n" not in str(err.value)


def refused(folder, tmp_path, **changes) -> str:
    """The one-line refusal of `folder` with config.json `changes`."""
    changed = changed_folder(folder, tmp_path, **changes)
    with pytest.raises(HFImportError) as err:
        import_model(str(changed), tmp_path / "out")
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()
    return str(err.value)


def changed_folder(folder, tmp_path, **changes):
    """A copy of `folder` with config.json `changes` (a value None: the key left out)."""
    changed = tmp_path / "changed"
    shutil.copytree(folder, changed)
    config = {**json.loads((changed / "config.json").read_text()), **changes}
    (changed / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    return changed


def assert_maps_only(model, text: str) -> None:
    """`model` has no masked-LM head: its trace has no predictions; fill_mask, sequence_log_probs and a pass for the
    logits each refuse in one line naming why."""
    assert not model.has_head and model.trace(text).settings["predictions"] == []
    ids = model.encode(text)
    for call in (lambda: model.fill_mask(text), lambda: model.sequence_log_probs([ids], [[ids[1]]]),
                 lambda: model.forced_pass(ids)):
        with pytest.raises(ValueError, match="needs a masked-language-model head") as err:
            call()
        assert "\n" not in str(err.value) and "attention maps only" in str(err.value)


def test_a_folder_without_a_masked_lm_head_opens_for_its_maps_only(folder, family, imported, tmp_path):
    changed = changed_folder(folder, tmp_path, architectures=["SomethingForSequenceClassification"])
    import_model(str(changed), tmp_path / "out")
    maps_only = viz_model.load(tmp_path / "out", device="cpu")
    text = f"A man {imported.mask_token} in the snow."
    assert_maps_only(maps_only, text)
    assert maps_only.config.masked_lm_head is False and imported.config.masked_lm_head is True
    assert "no masked-language-model head" in maps_only.card
    for ours, theirs in zip(maps_only.trace(text, "The dog reads.").encoder_attentions,
                            imported.trace(text, "The dog reads.").encoder_attentions, strict=True):
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("family", ["bert"], indirect=True)
def test_unsupported_encoder_families_are_refused_naming_what_is(folder, family, tmp_path):
    for kind in ("deberta", "mpnet"):
        message = refused(folder, tmp_path / kind, model_type=kind)
        assert "not an architecture this project can import" in message and "bert: BERT" in message


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert", "deberta-v2"], indirect=True)
def test_load_of_a_hugging_face_folder_and_from_transformers_give_the_encoder(hf, imported, folder, family, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_CACHE", str(tmp_path / "cache"))
    text = f"the old {imported.mask_token} runs in the park."
    for loaded in (viz_model.load(str(folder), device="cpu"), viz_model.from_transformers(*hf, device="cpu")):
        assert isinstance(loaded, EncoderModel)
        assert loaded.fill_mask(text) == imported.fill_mask(text)
    with pytest.raises(ValueError, match="an encoder has no search precision") as err:
        viz_model.load(imported.directory, device="cpu", precision="int8")
    assert "\n" not in str(err.value)


def test_the_encoder_options_belong_to_the_encoder_kind_and_it_is_not_trained_here():
    from viz_model.config import ConfigError, ModelConfig
    from viz_model.config.training import TrainConfig

    for option in ({"type_vocab_size": 2}, {"pad_positions": True}, {"shared_layers": 1}):
        with pytest.raises(ConfigError, match="options of the encoder-only kind"):
            ModelConfig(**option)
    encoder = ModelConfig(kind="encoder", decoder_layers=0, positional="learned", type_vocab_size=2)
    for option, said in (({"kv_heads": 2}, "not of an encoder-only model"),
                         ({"output_bias": True}, "an encoder-only model reads none of them")):
        with pytest.raises(ConfigError, match=said):
            ModelConfig(**{**encoder.to_dict(), **option})
    assert ModelConfig.from_dict(encoder.to_dict()) == encoder
    assert "type_vocab_size" not in ModelConfig().to_dict()
    # the positions each kind takes: an encoder's list names DeBERTa's; a translator's does not
    with pytest.raises(ConfigError, match="sinusoidal, learned, rope, alibi, relative, disentangled; got 'rotary'"):
        ModelConfig(**{**encoder.to_dict(), "positional": "rotary"})
    with pytest.raises(ConfigError, match="one of sinusoidal, learned, rope, alibi, relative; got 'rotary'"):
        ModelConfig(positional="rotary")
    with pytest.raises(ConfigError, match="disentangled positions .DeBERTa's. are of the encoder-only kind"):
        ModelConfig(positional="disentangled")
    with pytest.raises(ConfigError, match="an encoder-only run learns plain text lines: set text_lang"):
        TrainConfig(model=encoder)  # trained by its masked tokens on text lines (tests/training/test_train_mlm.py)


@pytest.mark.parametrize("family", ["bert"], indirect=True)
def test_the_translation_commands_refuse_an_encoder_in_one_line(imported, family, capsys, tmp_path):
    for name in ("src", "tgt"):
        (tmp_path / name).write_text("a dog runs\n")
    for command in (["translate", "--model", str(imported.directory), "A dog."],
                    ["importance", "--model", str(imported.directory), "--src", str(tmp_path / "src"), "--tgt",
                     str(tmp_path / "tgt"), "--out", str(tmp_path / "t.csv")]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "an encoder-only model" in err and err.count("\n") == 1


@pytest.mark.parametrize("family", ["bert"], indirect=True)
def test_a_tokenizer_json_that_stores_truncation_and_padding_reads_a_text_whole_as_transformers_does(folder, family,
                                                                                                    tmp_path):
    stored = tmp_path / "stored"
    shutil.copytree(folder, stored)
    settings = json.loads((stored / "tokenizer.json").read_text())
    settings["truncation"] = {"direction": "Right", "max_length": 6, "strategy": "LongestFirst", "stride": 0}
    settings["padding"] = {"strategy": {"Fixed": 40}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                           "pad_type_id": 0, "pad_token": "[PAD]"}
    (stored / "tokenizer.json").write_text(json.dumps(settings))
    import_model(str(stored), tmp_path / "out")
    ours = viz_model.load(tmp_path / "out", device="cpu")
    theirs = transformers.AutoTokenizer.from_pretrained(stored)
    for text, pair in PAIRS + [("a man runs in the snow with the old dog and the big red house", None)]:
        assert ours.encode(text, pair) == theirs(text, pair).input_ids
        assert 6 < len(ours.encode(text, pair)) < 40


@pytest.mark.parametrize("family", ["bert"], indirect=True)
def test_a_bert_folder_with_only_vocab_txt_imports_with_the_same_ids(folder, family, imported, tmp_path):
    alone = tmp_path / "vocab-only"
    shutil.copytree(folder, alone)
    vocab = json.loads((alone / "tokenizer.json").read_text())["model"]["vocab"]
    (alone / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    (alone / "tokenizer.json").unlink()
    settings = json.loads((alone / "tokenizer_config.json").read_text())
    (alone / "tokenizer_config.json").write_text(json.dumps({**settings, "tokenizer_class": "BertTokenizer",
                                                             "do_lower_case": True}))
    import_model(str(alone), tmp_path / "out")
    reread = viz_model.load(tmp_path / "out", device="cpu")
    for text, pair in PAIRS + [(f"A man {imported.mask_token} in the snow.", None)]:
        assert reread.encoded(text, pair) == imported.encoded(text, pair)
    assert transformers.AutoTokenizer.from_pretrained(alone)(*PAIRS[0]).input_ids == reread.encode(*PAIRS[0])


@pytest.mark.parametrize("family", ["bert"], indirect=True)
def test_the_analyses_of_an_encoder_refuse_what_is_a_translators_in_one_line(imported, family):
    from viz_model.analysis.ablation import ablate, head_importance
    from viz_model.analysis.word_alignment import corpus_aer

    text = f"A man {imported.mask_token} in the snow."
    for call, line in [(lambda: head_importance(imported, [text], ["A man runs in the snow."], bleu=True), "bleu"),
                       (lambda: ablate(imported, text, [("encoder", 0, 0)], beam=2), "beam"),
                       (lambda: corpus_aer(imported, [text], [text], []), "does not apply to an encoder")]:
        with pytest.raises(ValueError, match=line) as err:
            call()
        assert "\n" not in str(err.value)


def test_the_token_embeddings_given_in_place_of_the_ids_give_the_same_logits_and_gradients(imported, hf):
    encoded = imported.encoded(f"A man {imported.mask_token} in the snow.", "The dog reads.")
    tokens = imported.embeddings(encoded.ids).detach().requires_grad_(True)
    out = imported.forced_pass(encoded.ids, encoded.type_ids, token_embeddings=tokens)
    with torch.no_grad():
        plain = imported.forced_pass(encoded.ids, encoded.type_ids).logits
    assert torch.allclose(out.logits, plain, atol=1e-5)
    out.logits[0, imported.mask_positions(encoded.ids)[0]].max().backward()
    assert tokens.grad is not None and tokens.grad.abs().sum() > 0


@pytest.mark.parametrize("family", ["bert", "albert"], indirect=True)
def test_an_encoders_trace_saves_and_loads_back_losslessly(imported, family, tmp_path):
    from viz_model.trace import AttentionTrace

    trace = imported.trace(f"A man {imported.mask_token} in the snow.", "The dog reads.")
    for name in ("trace.npz", "trace.json"):
        trace.save(tmp_path / name)
        back = AttentionTrace.load(tmp_path / name)
        assert back.source_tokens == trace.source_tokens and back.settings == trace.settings
        for ours, theirs in zip(back.encoder_attentions, trace.encoder_attentions):
            assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("family", ["bert"], indirect=True)
def test_a_bert_pretraining_folder_imports_its_masked_lm_head_without_the_rest(family, hf, tmp_path):
    model, tokenizer = hf
    torch.manual_seed(1)
    pretraining = transformers.BertForPreTraining(model.config)
    pretraining.bert.load_state_dict(model.bert.state_dict(), strict=False)
    pretraining.cls.predictions.load_state_dict(model.cls.predictions.state_dict())
    pretraining.eval().save_pretrained(tmp_path / "pretraining")
    tokenizer.save_pretrained(tmp_path / "pretraining")
    import_model(str(tmp_path / "pretraining"), tmp_path / "out")
    ours = viz_model.load(tmp_path / "out", device="cpu")
    inputs = tokenizer(*PAIRS[0], return_tensors="pt")
    with torch.no_grad():
        theirs = pretraining(**inputs).prediction_logits
        logits = ours.forced_pass(inputs.input_ids[0].tolist(), inputs.token_type_ids[0].tolist()).logits
    assert float((logits - theirs).abs().max()) < LOGIT_TOLERANCE


@pytest.mark.parametrize("family", ["albert", "xlm-roberta", "deberta-v3"], indirect=True)
def test_a_folder_with_only_its_sentencepiece_model_imports_exactly(family, tmp_path):
    pytest.importorskip("sentencepiece")
    from support.hf_encoders import build_sentencepiece_folder

    folder = build_sentencepiece_folder(tmp_path, family)
    assert not (folder / "tokenizer.json").exists()
    model = getattr(transformers, CONFIGS[family][1]).from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    import_model(str(folder), tmp_path / "out")
    ours = viz_model.load(tmp_path / "out", device="cpu")
    pipe = transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer, device="cpu")
    for text in masked(sentences(WORDS_EN, 4, 5), tokenizer.mask_token):
        assert ours.encode(text) == tokenizer(text).input_ids
        theirs = pipe(text, top_k=5)
        theirs = theirs if isinstance(theirs[0], list) else [theirs]
        assert [[p["token_str"] for p in row] for row in theirs] == [[t for t, _ in row] for row in
                                                                      ours.fill_mask(text)], text
    inputs = tokenizer(*PAIRS[0], return_tensors="pt")
    assert ours.encode(*PAIRS[0]) == inputs.input_ids[0].tolist()
    with torch.no_grad():
        theirs = model(**inputs, output_attentions=True)
    trace = ours.trace(*PAIRS[0])
    assert max(float(np.abs(a - b[0].numpy()).max()) for a, b in zip(trace.encoder_attentions, theirs.attentions)) \
        < MAP_TOLERANCE


@pytest.mark.parametrize("family", ["roberta"], indirect=True)
def test_a_pad_token_in_the_text_reads_robertas_pad_row_as_transformers_does(hf, imported, family):
    model, tokenizer = hf
    text = f"a dog {tokenizer.pad_token} runs {tokenizer.mask_token} the snow"
    inputs = tokenizer(text, return_tensors="pt")
    assert tokenizer.pad_token_id in inputs.input_ids[0].tolist()
    with torch.no_grad():
        theirs = model(**inputs, output_attentions=True)
        ours = imported.forced_pass(inputs.input_ids[0].tolist(), need_weights=True)
    pad = inputs.input_ids[0].tolist().index(tokenizer.pad_token_id)
    assert int(ours.positions[0, pad]) == tokenizer.pad_token_id
    assert float((ours.logits - theirs.logits).abs().max()) < LOGIT_TOLERANCE
    for mine, other in zip(ours.attentions, theirs.attentions):
        assert float((mine - other).abs().max()) < MAP_TOLERANCE


CLASSIFIERS = {"bert": "BertForSequenceClassification", "deberta-v3": "DebertaV2ForSequenceClassification",
               "deberta-v2": "DebertaV2ForSequenceClassification"}


@pytest.mark.parametrize("family", list(CLASSIFIERS), indirect=True)
def test_a_sequence_classifier_folder_opens_for_its_maps_only(hf, family, tmp_path):
    model, tokenizer = hf
    torch.manual_seed(1)
    classifier = getattr(transformers, CLASSIFIERS[family])(model.config)
    loaded = classifier.base_model.load_state_dict(model.base_model.state_dict(), strict=False)
    assert [k for k in loaded.missing_keys if not k.startswith("pooler.")] == []  # the encoder is the fitted one
    classifier.save_pretrained(tmp_path / "classifier")
    tokenizer.save_pretrained(tmp_path / "classifier")
    classifier = getattr(transformers, CLASSIFIERS[family]).from_pretrained(tmp_path / "classifier",
                                                                          attn_implementation="eager").eval()
    import_model(str(tmp_path / "classifier"), tmp_path / "out")
    ours = viz_model.load(tmp_path / "out", device="cpu")
    assert_maps_only(ours, f"A man {tokenizer.mask_token} in the snow.")
    for text, pair in PAIRS:
        inputs = tokenizer(text, pair, return_tensors="pt")
        with torch.no_grad():
            theirs = classifier(**inputs, output_attentions=True).attentions
        trace = ours.trace(text, pair)
        assert trace.source_ids == inputs["input_ids"][0].tolist()
        assert max(float(np.abs(a - b[0].numpy()).max()) for a, b in zip(trace.encoder_attentions, theirs,
                                                                         strict=True)) < MAP_TOLERANCE


@pytest.mark.parametrize("family", ["modernbert"], indirect=True)
def test_modernberts_local_layers_see_their_window_and_turn_by_their_own_base(imported, hf, family, folder, tmp_path):
    cfg = imported.config
    assert cfg.windowed_layers == (1,) and cfg.window_radius == 4 and cfg.norm == "pre"
    assert [rotary.base for rotary in imported.network.rotary] == [1000.0, 50.0]
    text = f"a man runs in the snow with the old dog and the big red house {imported.mask_token} the park."
    maps = imported.trace(text).encoder_attentions
    n = maps[0].shape[-1]
    far = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) > 4
    assert n > 10 and (maps[1][:, far] == 0).all() and (maps[0][:, far] > 0).all() and (maps[2][:, far] > 0).all()
    assert "rope_type 'linear' is not implemented" in refused(
        folder, tmp_path, rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0},
                                           "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}})


@pytest.mark.parametrize("family", ["deberta-v3", "deberta-v2"], indirect=True)
def test_debertas_three_terms_add_up_to_the_scores_it_computed(imported, hf, family):
    from viz_model.nn.disentangled import DisentangledRecord

    text = f"a man runs in the snow with the old dog and the big red house {imported.mask_token} the park."
    encoded = imported.encoded(text)
    with torch.no_grad():
        out = imported.forced_pass(encoded.ids, encoded.type_ids, need_weights=True)
        theirs = hf[0](**hf[1](text, return_tensors="pt"), output_attentions=True).attentions
    for record, other in zip(out.records, theirs):
        assert isinstance(record, DisentangledRecord)
        summed = record.content + record.content_to_position + record.position_to_content
        assert torch.allclose(summed, record.scores, atol=1e-5)
        assert float((torch.softmax(summed, -1) - other).abs().max()) < MAP_TOLERANCE
        for term in (record.content_to_position, record.position_to_content):
            assert float(term.abs().max()) > 0.1  # each term moves the scores


@pytest.mark.parametrize("family", ["deberta-v3"], indirect=True)
def test_debertas_log_buckets_are_transformers_and_what_it_cannot_run_is_refused(folder, family, tmp_path):
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    from viz_model.nn.disentangled import log_bucket_position

    offsets = torch.arange(-300, 301)[None, :]
    for buckets, largest in ((8, 64), (256, 512), (32, 128)):
        assert torch.equal(log_bucket_position(offsets, buckets, largest),
                           make_log_bucket_position(offsets, buckets, largest).long())
    assert "conv_kernel_size 4: an even kernel" in refused(folder, tmp_path / "conv", conv_kernel_size=4)
    assert "without relative_attention is not implemented" in refused(folder, tmp_path / "plain",
                                                                      relative_attention=False)
    assert "set legacy true to read the head it has" in refused(folder, tmp_path / "head", legacy=False,
                                                                embedding_size=32)


@pytest.mark.parametrize("family", ["deberta-v2", "deberta-v3"], indirect=True)
def test_a_deberta_config_without_legacy_as_the_hubs_v3_reads_the_head_its_checkpoint_has(hf, family, folder, tmp_path):
    """The hub's DeBERTa-v3 configs name no legacy (transformers then reads the legacy head ``cls.predictions``): the
    import reads the head the checkpoint has, exactly as transformers computes it with the legacy that names it."""
    model, tokenizer = hf
    legacy = model.config.legacy
    assert any(k.startswith("cls.predictions." if legacy else "lm_predictions.") for k in model.state_dict())
    changed = changed_folder(folder, tmp_path, legacy=None)
    assert "legacy" not in json.loads((changed / "config.json").read_text())
    import_model(str(changed), tmp_path / "out")
    ours = viz_model.load(tmp_path / "out", device="cpu")
    inputs = tokenizer(*PAIRS[0], return_tensors="pt")
    with torch.no_grad():
        theirs = model(**inputs).logits
        logits = ours.forced_pass(inputs.input_ids[0].tolist(), inputs.token_type_ids[0].tolist()).logits
        hub = getattr(transformers, CONFIGS[family][1]).from_pretrained(changed).eval()(**inputs).logits
    assert float((logits - theirs).abs().max()) < LOGIT_TOLERANCE
    # transformers reading the same folder: the legacy head where the checkpoint has it; else drawn at random
    assert (float((hub - theirs).abs().max()) < LOGIT_TOLERANCE) == legacy
    pipe = transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer, device="cpu")
    text = f"the old {tokenizer.mask_token} runs in the park."
    assert [p["token_str"] for p in pipe(text, top_k=5)] == [t for t, _ in ours.fill_mask(text)[0]]
    if not legacy:
        message = refused(folder, tmp_path / "wide", legacy=None, embedding_size=16)
        assert "embedding_size 16 != hidden_size 32: transformers' head lm_predictions.lm_head cannot" in message


@pytest.mark.parametrize("family", ["deberta-v2"], indirect=True)
def test_deberta_v2s_convolution_after_the_first_layer_moves_the_later_maps(imported, hf, family, monkeypatch):
    text = f"a man runs in the snow with the old dog and the big red house {imported.mask_token} the park."
    with torch.no_grad():
        theirs = hf[0](**hf[1](text, return_tensors="pt"), output_attentions=True).attentions
    assert imported.config.conv_kernel_size == 3 and imported.network.convolution is not None
    with_conv = imported.trace(text).encoder_attentions
    monkeypatch.setattr(imported.network, "convolution", None)
    without = imported.trace(text).encoder_attentions
    assert np.abs(with_conv[1] - theirs[1][0].numpy()).max() < MAP_TOLERANCE
    assert np.array_equal(with_conv[0], without[0]) and np.abs(without[1] - theirs[1][0].numpy()).max() > 1e-3
