"""Several corpora in one run: [[corpora]] configs, weighted epochs, the held-out split by distinct source sentence,
multi-reference BLEU, bad input before training, and a tiny mixed run that resumes exactly after a kill."""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
import torch
from support.data import make_pairs, tiny_train_config, write_lines, write_split
from support.training import Killed, assert_same_training_state, fresh_run_dir, kill_at_step, read_log, trained_run

from viz_model.cli.main import main
from viz_model.config import HOLDOUT_SEED, ConfigError, CorpusConfig, TrainConfig, apply_override
from viz_model.data.bleu import corpus_scores, reference_streams
from viz_model.data.textfiles import DataError
from viz_model.modeldir.coverage import load_training_stats
from viz_model.search.batched import translate_texts
from viz_model.train.corpora import load_corpora, select_eval_sets
from viz_model.train.data import EncodedPairs, EvalSet, make_batches, sample_epoch
from viz_model.train.evaluate import evaluate_bleu
from viz_model.train.export import export_run
from viz_model.train.loop import train
from viz_model.train.resume import config_differences, prepare_run
from viz_model.train.splits import holdout_split

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
REPO = Path(__file__).resolve().parents[2]

# What a run saved before [[corpora]] existed (the running Multi30K training's config.json): it must still load,
# resume and compare equal.
OLD_CONFIG = {
    "model": {"vocab_size": 8000, "encoder_layers": 3, "decoder_layers": 3, "d_model": 256, "heads": 8, "d_ff": 1024,
              "dropout": 0.1, "attention_dropout": 0.0, "max_positions": 256, "positional": "sinusoidal",
              "norm": "post", "share_embeddings": True, "pad_id": 0},
    "data_dir": "/work/shared/data/multi30k", "src_lang": "en", "tgt_lang": "de", "train_prefix": "train",
    "val_prefix": "val", "test_prefixes": ["test_2016_flickr", "test_2017_flickr", "test_2017_mscoco"],
    "vocab_size": 8000, "tokenizer_type": "bpe", "max_len": 128, "batch_tokens": 4000, "epochs": 30, "max_steps": 0,
    "lr_scale": 1.0, "lr_peak": 0.0007, "warmup_steps": 500, "adam_beta1": 0.9, "adam_beta2": 0.98, "adam_eps": 1e-09,
    "weight_decay": 0.0, "label_smoothing": 0.1, "clip_norm": 0.0, "seed": 1234, "checkpoint_every_steps": 100,
    "keep_epoch_checkpoints": 5, "average_last": 5, "eval_every_epochs": 1, "eval_bleu_sentences": 300,
    "eval_beam": 1, "threads": 0, "device": "auto", "compile": False, "bf16": True}


# --- fixtures: three tiny corpora in tmp dirs --------------------------------------------------------
def everyday_pairs() -> list[tuple[str, str]]:
    """A Tatoeba-like file: distinct English sentences, every third with a second German translation."""
    english = list(dict.fromkeys(make_pairs(80, seed=21)))
    pairs = []
    for i, (en, de) in enumerate(english):
        pairs.append((en, de))
        if i % 3 == 0:
            pairs.append((en, de.replace(".", "!")))
    return pairs


@pytest.fixture(scope="module")
def corpora_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpora")
    write_split(root / "caps", "train", make_pairs(120, seed=11))
    write_split(root / "caps", "val", make_pairs(5, seed=12))
    write_split(root / "caps", "test_2016_flickr", make_pairs(4, seed=13))
    write_split(root / "everyday", "pairs", everyday_pairs())
    write_split(root / "news", "newstest2014", make_pairs(3, seed=14))
    return root


def corpora_tables(root: Path) -> list[dict]:
    return [{"name": "caps", "data_dir": str(root / "caps"), "train": "train", "val": "val",
             "test": ["test_2016_flickr"], "weight": 1.5},
            {"name": "everyday", "data_dir": str(root / "everyday"), "holdout": "pairs", "holdout_val": 4,
             "holdout_test": 5, "weight": 0.5},
            {"name": "news", "data_dir": str(root / "news"), "test": ["newstest2014"]}]


def mixed_config(root: Path, corpora: list[dict] | None = None, **overrides) -> TrainConfig:
    """The tiny training config of tests/conftest.py, on the three corpora instead of one data_dir."""
    values = tiny_train_config(root).to_dict()
    del values["data_dir"], values["test_prefixes"]
    values.update(corpora=corpora_tables(root) if corpora is None else corpora, **overrides)
    return TrainConfig.from_dict(values)


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, corpora_root) -> Path:
    return trained_run(tmp_path_factory.mktemp("runs") / "mixed", mixed_config(corpora_root))


# --- config --------------------------------------------------------------------------------------------
MIXED_TOML = """
epochs = 3

[model]
vocab_size = 200
d_model = 32
heads = 4

[[corpora]]
name = "caps"
data_dir = "data/caps"
train = "train"
val = "val"
test = ["test_a", "test_b"]
weight = 2

[[corpora]]
name = "everyday"
data_dir = "data/everyday"
holdout = "pairs"
weight = 0.25
"""


def test_corpora_tables_parse_round_trip_and_override(tmp_path):
    path = tmp_path / "mixed.toml"
    path.write_text(MIXED_TOML)
    cfg = TrainConfig.from_toml(path, ["corpora.everyday.weight=0.5", "corpora.0.val=dev"])
    caps, everyday = cfg.corpora
    assert isinstance(caps, CorpusConfig) and cfg.corpus_list == cfg.corpora
    assert (caps.train, caps.val, caps.test, caps.weight, caps.trains) == ("train", "dev", ("test_a", "test_b"), 2,
                                                                           True)
    assert (everyday.holdout, everyday.weight, everyday.holdout_val, everyday.holdout_test) == ("pairs", 0.5, 1000,
                                                                                               1000)
    assert everyday.holdout_seed == HOLDOUT_SEED == 20180513
    saved = json.loads(json.dumps(cfg.to_dict()))
    assert TrainConfig.from_dict(saved) == cfg and config_differences(saved, cfg.to_dict()) == []
    other = TrainConfig.from_toml(path, ["corpora.everyday.weight=3"]).to_dict()
    assert config_differences(saved, other) == ["corpora.caps.val", "corpora.everyday.weight"]
    with pytest.raises(ConfigError, match="no table named 'nope'"):
        TrainConfig.from_toml(path, ["corpora.nope.weight=1"])
    with pytest.raises(ConfigError, match="is a list of tables"):
        apply_override({"corpora": [{"name": "a"}]}, "corpora.weight=1")


def test_the_old_single_corpus_format_still_loads_resumes_and_compares_equal(tmp_path):
    cfg = TrainConfig.from_dict(json.loads(json.dumps(OLD_CONFIG)))
    assert cfg.corpora is None and cfg.to_dict() == OLD_CONFIG  # saved configs keep their exact form
    (corpus,) = cfg.corpus_list
    assert (corpus.name, corpus.data_dir, corpus.train, corpus.val, corpus.test, corpus.weight) == (
        "multi30k", "/work/shared/data/multi30k", "train", "val", tuple(OLD_CONFIG["test_prefixes"]), 1.0)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(OLD_CONFIG, indent=2))
    assert prepare_run(cfg, run, resume=True) == cfg  # no spurious difference against the saved file
    assert prepare_run(None, run, resume=True) == cfg
    shipped = TrainConfig.from_toml(REPO / "configs" / "multi30k-en-de.toml", ["data_dir=/work/shared/data/multi30k"])
    assert config_differences(OLD_CONFIG, shipped.to_dict()) == []


def test_shipped_mixed_config_is_valid():
    cfg = TrainConfig.from_toml(REPO / "configs" / "mixed-en-de.toml")
    assert cfg.model.heads == 8 and cfg.model.d_model % cfg.model.heads == 0
    names = {c.name: c for c in cfg.corpora}
    assert set(names) == {"multi30k", "tatoeba", "wmt"}
    assert names["tatoeba"].holdout and (names["tatoeba"].holdout_val, names["tatoeba"].holdout_test) == (1000, 1000)
    assert names["tatoeba"].holdout_rule == "connected"  # new runs: no leak of variants into training
    assert not names["wmt"].trains and names["wmt"].test == ("newstest2014",)
    assert "test_2016_flickr" in names["multi30k"].test


@pytest.mark.parametrize("change, match", [
    (lambda c: [], "corpora is empty"),
    (lambda c: "caps", "corpora must be a list"),
    (lambda c: [{**c[0], "weight": 0}, c[1]], "corpus 'caps': weight must be above 0, got 0"),
    (lambda c: [{**c[0], "weight": -1.5}, c[1]], "weight must be above 0"),
    (lambda c: [{**c[0], "weight": float("nan")}, c[1]], "weight must be a finite number"),
    (lambda c: [c[0], {**c[1], "name": "caps"}], "two corpora are named 'caps'"),
    (lambda c: [c[0], {**c[0], "name": "caps2"}], "duplicate corpora: 'caps' and 'caps2' both read"),
    (lambda c: [{**c[0], "data_dir": c[0]["data_dir"] + "/."}, {**c[0], "name": "b", "train": "", "val": ""}],
     "duplicate corpora: 'caps' and 'b' both read .*test_2016_flickr"),
    (lambda c: [{**c[0], "test": ["train"]}], "corpus 'caps' reads the same files .*train.* twice"),
    (lambda c: [{**c[1], "train": "train"}], "with holdout, the train, val and test parts come from the split"),
    (lambda c: [c[2]], "no corpus has training data"),
    (lambda c: [{"name": "x", "data_dir": "d"}], "corpus 'x': no data"),
    (lambda c: [{**c[0], "wieght": 2}], r"corpus 'caps': unknown key\(s\) 'wieght' \(did you mean 'weight'\?\)"),
    (lambda c: [{**c[0], "name": "a b"}], "name must be letters"),
    (lambda c: [5], "corpus #1: expected a mapping"),
])
def test_bad_corpora_configs_are_clear_errors(tmp_path, change, match):
    with pytest.raises(ConfigError, match=match):
        mixed_config(tmp_path, change(corpora_tables(tmp_path)))


def test_single_corpus_keys_and_corpora_exclude_each_other(tmp_path):
    with pytest.raises(ConfigError, match="data_dir belong.* single-corpus format"):
        mixed_config(tmp_path, data_dir="elsewhere")


# --- bad data: clear errors before training starts -------------------------------------------------------
@pytest.mark.parametrize("damage, match", [
    (lambda r: (r / "caps" / "val.de.gz").unlink(), "no file val.de.gz or val.de"),
    (lambda r: shutil.rmtree(r / "news"), "news: data directory not found"),
    (lambda r: (r / "news" / "newstest2014.en.gz").unlink(), "no file newstest2014.en.gz"),  # test sets too
    (lambda r: write_lines(r / "everyday" / "pairs.de.gz", ["Nur eine Zeile."]), "has 1 lines|misaligned"),
    (lambda r: write_lines(r / "caps" / "test_2016_flickr.de.gz", ["Eins.", "Zwei."]),
     "test_2016_flickr.en.gz has 4 lines but .*test_2016_flickr.de.gz has 2"),
])
def test_bad_corpus_directories_fail_before_training(tmp_path, corpora_root, damage, match):
    root = shutil.copytree(corpora_root, tmp_path / "data")
    damage(root)
    run = tmp_path / "run"
    with pytest.raises(DataError, match=match):
        train(mixed_config(root), run)
    assert not (run / "tokenizer.model").exists() and not (run / "latest.pt").exists()


def test_a_holdout_larger_than_the_corpus_fails_before_training(tmp_path, corpora_root):
    tables = corpora_tables(corpora_root)
    tables[1]["holdout_test"] = 500
    with pytest.raises(DataError, match=r"holding out 4 \+ 500 source sentences needs more"):
        train(mixed_config(corpora_root, tables), tmp_path / "run")
    assert not (tmp_path / "run" / "tokenizer.model").exists()


def test_bad_corpora_are_user_errors_on_the_command_line(capsys, tmp_path, corpora_root):
    toml = tmp_path / "mixed.toml"
    toml.write_text(json_to_toml(mixed_config(corpora_root).to_dict()))
    assert main(["train", "--config", str(toml), "--run-dir", str(tmp_path / "r"), "corpora.caps.weight=0"]) == 2
    assert "corpus 'caps': weight must be above 0" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def json_to_toml(values: dict) -> str:
    """A TOML file of a config dict (top-level keys, [model], [[corpora]])."""
    values = dict(values)
    model, corpora = values.pop("model"), values.pop("corpora")
    lines = [f"{k} = {json.dumps(v)}" for k, v in values.items()] + ["", "[model]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in model.items()]
    for table in corpora:
        lines += ["", "[[corpora]]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


# --- weighted epochs ---------------------------------------------------------------------------------
def test_weighted_epochs_are_deterministic_and_follow_the_weights():
    sizes, weights = [50, 40, 30], [2.0, 0.5, 1.25]
    a = sample_epoch(sizes, weights, seed=7, epoch=3)
    assert np.array_equal(a, sample_epoch(sizes, weights, seed=7, epoch=3))  # a function of (seed, epoch)
    assert not np.array_equal(a, sample_epoch(sizes, weights, seed=7, epoch=4))  # a fresh subset every epoch
    assert not np.array_equal(a, sample_epoch(sizes, weights, seed=8, epoch=3))
    counts = np.bincount(a, minlength=120)
    assert (counts[:50] == 2).all()  # weight 2: every pair twice
    second, third = counts[50:90], counts[90:]
    assert second.sum() == 20 and set(second) <= {0, 1}  # weight 0.5: half the pairs, without replacement
    assert third.sum() == 30 + round(0.25 * 30) and set(third) <= {1, 2}  # weight 1.25: all once, a quarter twice
    assert np.array_equal(sample_epoch([5, 3], [1.0, 1.0], 1, 0), np.arange(8))  # weights 1: every pair once


def test_batches_of_a_weighted_epoch_cover_its_sample_and_weight_one_is_the_old_batching():
    rng = random.Random(0)
    data = EncodedPairs([[5] * rng.randint(1, 20) for _ in range(90)], [[6] * rng.randint(1, 20) for _ in range(90)])
    pool = sample_epoch([60, 30], [1.5, 0.4], seed=3, epoch=1)
    batches = make_batches(data, 120, seed=3, epoch=1, pool=pool)
    assert sorted(i for b in batches for i in b) == sorted(pool.tolist())
    assert batches == make_batches(data, 120, seed=3, epoch=1, pool=pool)
    for batch in batches:
        longest = max(max(len(data.src[i]), len(data.tgt[i]) + 1) for i in batch)
        assert longest * len(batch) <= 120 or len(batch) == 1
    for epoch in (0, 1):  # a single corpus of weight 1 is batched exactly as before [[corpora]]
        assert make_batches(data, 120, 3, epoch) == make_batches(data, 120, 3, epoch, sample_epoch([90], [1.0], 3,
                                                                                                  epoch))


# --- the held-out split ------------------------------------------------------------------------------
def test_holdout_split_by_distinct_source_sentence():
    pairs = everyday_pairs()
    src, tgt = [en for en, _ in pairs], [de for _, de in pairs]
    split = holdout_split(src, tgt, n_val=6, n_test=7, seed=HOLDOUT_SEED)
    assert (len(split.val_src), len(split.test_src)) == (6, 7)
    assert len(set(split.val_src)) == 6 and len(set(split.test_src)) == 7
    train, val, test = set(split.train_src), set(split.val_src), set(split.test_src)
    assert not (train & val or train & test or val & test)  # no English sentence in two parts
    translations = {}
    for en, de in pairs:
        translations.setdefault(en, []).append(de)
    for sources, refs in ((split.val_src, split.val_refs), (split.test_src, split.test_refs)):
        assert refs == [translations[s] for s in sources]  # all translations kept, in file order
    assert any(len(r) == 2 for r in split.val_refs + split.test_refs)
    assert len(split.train_src) + sum(len(r) for r in split.val_refs + split.test_refs) == len(pairs)
    assert list(zip(split.train_src, split.train_tgt)) == [p for p in pairs if p[0] in train]
    # the documented procedure: distinct sentences ranked by SHA-256 of "seed<TAB>sentence"
    ranked = sorted(translations, key=lambda s: hashlib.sha256(f"{HOLDOUT_SEED}\t{s}".encode()).digest())
    assert split.val_src == ranked[:6] and split.test_src == ranked[6:13]


def test_holdout_split_is_reproducible_and_independent_of_file_order():
    pairs = everyday_pairs()
    src, tgt = [en for en, _ in pairs], [de for _, de in pairs]
    a, b = holdout_split(src, tgt, 5, 5, seed=1), holdout_split(src, tgt, 5, 5, seed=1)
    assert a == b
    shuffled = random.Random(3).sample(pairs, len(pairs))
    c = holdout_split([en for en, _ in shuffled], [de for _, de in shuffled], 5, 5, seed=1)
    assert (c.val_src, c.test_src) == (a.val_src, a.test_src)
    assert [sorted(r) for r in c.val_refs] == [sorted(r) for r in a.val_refs]
    assert holdout_split(src, tgt, 5, 5, seed=2).val_src != a.val_src  # the seed decides
    with pytest.raises(DataError, match="distinct"):
        holdout_split(src, tgt, 40, 40, seed=1)


def test_loaded_corpora_keep_held_out_sentences_out_of_training(corpora_root):
    caps, everyday, news = load_corpora(mixed_config(corpora_root))
    assert [s.name for s in caps.eval_sets] == ["caps:val", "caps:test_2016_flickr"]
    assert [s.name for s in everyday.eval_sets] == ["everyday:val", "everyday:test"]
    assert (news.train_src, [s.name for s in news.eval_sets]) == ([], ["news:newstest2014"])
    held = set(everyday.val.src) | set(everyday.tests[0].src)
    assert len(held) == 9 and not held & set(everyday.train_src)
    assert everyday.val.pairs()[0].count(everyday.val.src[0]) == len(everyday.val.refs[0])


# --- multi-reference BLEU ----------------------------------------------------------------------------
def test_multi_reference_bleu_pads_missing_references_with_none():
    hyps = ["Der Hund rennt im Park.", "Eine Frau liest ein Buch.", "Zwei Kinder spielen."]
    refs = [["Ein Hund läuft im Park.", "Der Hund rennt im Park."], ["Eine Frau liest ein Buch."],
            ["Zwei Kinder spielen draußen.", "Kinder spielen.", "Zwei Kinder spielen."]]
    streams = reference_streams(refs)
    assert streams == [["Ein Hund läuft im Park.", "Eine Frau liest ein Buch.", "Zwei Kinder spielen draußen."],
                       ["Der Hund rennt im Park.", None, "Kinder spielen."],
                       [None, None, "Zwei Kinder spielen."]]
    scores = corpus_scores(hyps, streams)
    assert scores["bleu"] == 100.0  # every hypothesis equals one of its references (not always the first)
    by_hand = [["Ein Hund läuft im Park.", "Eine Frau liest ein Buch.", "Zwei Kinder spielen draußen."],
               ["Der Hund rennt im Park.", None, "Kinder spielen."], [None, None, "Zwei Kinder spielen."]]
    assert scores == {"bleu": round(sacrebleu.corpus_bleu(hyps, by_hand).score, 2),
                      "chrf": round(sacrebleu.corpus_chrf(hyps, by_hand).score, 2)}
    first_only = corpus_scores(hyps, [r[0] for r in refs])
    assert first_only["bleu"] < 100 and first_only["chrf"] < scores["chrf"]
    # None is dropped per sentence; an empty string would be a real, empty reference: here its length 0 is the
    # closest to the short "Ja." and lifts the brevity penalty (a wrong, higher BLEU)
    hyps = ["Der Hund rennt im Park.", "Eine Frau liest ein Buch heute.", "Ja."]
    streams = reference_streams([["Ein Hund läuft im Park.", "Der Hund rennt."], ["Eine Frau liest ein Buch."],
                                 ["Ja, das stimmt so."]])
    bleu = sacrebleu.BLEU()
    assert corpus_scores(hyps, streams)["bleu"] == round(bleu.corpus_score(hyps, streams).score, 2) == 45.9
    assert "nrefs:var" in bleu.get_signature().format()
    assert sacrebleu.corpus_bleu(hyps, [[r or "" for r in stream] for stream in streams]).score > 56
    with pytest.raises(ValueError, match="at least one reference"):
        reference_streams([["a"], []])


def test_evaluate_bleu_scores_an_eval_set_against_all_references(random_net, tokenizer):
    src = ["A man is running in the park.", "Two dogs is playing on the beach."]
    hyps = translate_texts(random_net, tokenizer, src, beam=1, device=torch.device("cpu"))
    data = EvalSet("x:test", src, [["Ein Mann läuft im Park.", hyps[0]], ["Zwei Hunde spielen am Strand."]])
    scores = evaluate_bleu(random_net, tokenizer, data, 1, torch.device("cpu"))
    streams = [["Ein Mann läuft im Park.", "Zwei Hunde spielen am Strand."], [hyps[0], None]]
    assert scores == corpus_scores(hyps, streams)


# --- a tiny mixed run -----------------------------------------------------------------------------------
def test_a_mixed_run_samples_by_weight_validates_each_corpus_and_scores_every_set(mixed_run):
    events = read_log(mixed_run)
    start = events[0]
    assert start["event"] == "start"
    caps, everyday = start["corpora"]
    assert (caps["name"], caps["weight"], everyday["name"], everyday["weight"]) == ("caps", 1.5, "everyday", 0.5)
    assert start["train_pairs"] == caps["train_pairs"] + everyday["train_pairs"]
    assert start["epoch_pairs"] == round(1.5 * caps["train_pairs"]) + round(0.5 * everyday["train_pairs"])
    assert start["eval_sets"]["everyday:test"]["sentences"] == 5
    assert start["eval_sets"]["everyday:test"]["references"] > 5  # several translations per sentence
    vals = [e for e in events if e["event"] == "val"]
    assert [e["epoch"] for e in vals] == [1, 2]
    for e in vals:
        assert {"val_loss", "val_bleu", "val_chrf", "val_loss_caps", "val_bleu_caps", "val_loss_everyday",
                "val_bleu_everyday", "val_chrf_everyday"} <= set(e)
        assert math.isfinite(e["val_loss"]) and "val_loss_news" not in e
        assert e["val_bleu"] == round((e["val_bleu_caps"] + e["val_bleu_everyday"]) / 2, 2)
    results = events[-1]["results"]
    sets = ["caps:val", "caps:test_2016_flickr", "everyday:val", "everyday:test", "news:newstest2014"]
    assert set(results) == {f"{s}/beam{b}" for s in sets for b in (1, 4)}
    model_dir = mixed_run / "model"
    assert json.loads((model_dir / "results.json").read_text()) == results
    card = (model_dir / "MODEL_CARD.md").read_text()
    assert "caps (weight 1.5) + everyday (weight 0.5)" in card
    assert "| everyday:test |" in card and "| news:newstest2014 |" in card
    assert "4 validation and 5 test English sentences held out" in card and f"seed {HOLDOUT_SEED}" in card
    assert "against **27.3**" in card and "times fewer than the paper's 4.5 million" in card


def test_a_killed_mixed_run_resumes_exactly(tmp_path, monkeypatch, mixed_run, corpora_root):
    run = fresh_run_dir(tmp_path / "run", mixed_run)
    steps = [e["step"] for e in read_log(mixed_run) if e["event"] == "val"]
    kill_at_step(monkeypatch, steps[0] + 3)  # in the second epoch, whose weighted sample differs from the first
    with pytest.raises(Killed):
        train(mixed_config(corpora_root), run)
    monkeypatch.undo()
    assert 0 < torch.load(run / "latest.pt", weights_only=True)["step"] < steps[-1]
    train(None, run, resume=True)
    assert_same_training_state(run, mixed_run)
    assert [e["step"] for e in read_log(run) if e["event"] == "train"] == \
        [e["step"] for e in read_log(mixed_run) if e["event"] == "train"]


def test_export_scores_sets_by_name(tmp_path, mixed_run):
    out = export_run(mixed_run, tmp_path / "exported", last=1, evaluate=("everyday:test", "news"))
    results = json.loads((out / "results.json").read_text())
    assert set(results) == {f"{s}/beam{b}" for s in ("everyday:test", "news:newstest2014") for b in (1, 4)}
    cfg = TrainConfig.from_dict(json.loads((mixed_run / "config.json").read_text()))
    stats = load_training_stats(out)  # from the training corpora only (news is evaluation-only)
    trained = [(c.config.name, len(c.train_src)) for c in load_corpora(cfg) if c.train_src]
    assert [(c.name, c.sentences) for c in stats.corpora] == trained and trained[0] == ("caps", 120)
    assert [s.name for s in select_eval_sets(cfg, ("all",))] == ["caps:val", "caps:test_2016_flickr", "everyday:val",
                                                                 "everyday:test", "news:newstest2014"]
    with pytest.raises(ConfigError, match="no evaluation set 'everyday:dev'; this run has caps:val"):
        select_eval_sets(cfg, ("everyday:dev",))

