"""The trainer on an encoder-only model (fp32, CPU, one thread): BERT's masking rule on a seeded draw, the masked-token
loss, a tiny run on the fixture corpus's English lines whose loss falls, an exact resume after a kill, an export
scored by held-out masked-token accuracy that `viz_model.load` opens as an `EncoderModel` filling a mask, the CLI with
configs/multi30k-mlm-en.toml, and the kind's refusals."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from support.cli import run
from support.data import tiny_train_config
from support.training import Killed, assert_same_training_state, kill_at_step, read_log, trained_run

import viz_model
from viz_model.config import ConfigError, ModelConfig, TrainConfig
from viz_model.nn.encoder_lm import MaskedLM
from viz_model.tokenization.encoder_tokenizer import RULES
from viz_model.tokenization.tokenizer import PAD_ID
from viz_model.tokenization.wordpiece import CLS_ID, MASK_ID, SEP_ID, SPECIALS, train_wordpiece
from viz_model.train.data import EncodedPairs, encode_lines
from viz_model.train.loop import train
from viz_model.train.mlm_objective import ALL_MASKED, MaskedTokenLoss, draw_seed, mask_tokens, masked_batch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
REPO = Path(__file__).resolve().parents[2]
MLM_MODEL = {"kind": "encoder", "encoder_layers": 2, "decoder_layers": 0, "d_model": 32, "heads": 4, "d_ff": 64,
             "dropout": 0.1, "max_positions": 64, "positional": "learned", "norm": "pre", "activation": "gelu",
             "scale_embeddings": False}
TRANSLATION_ONLY = {"eval_bleu_sentences": 1014}  # the fixture's translation setting, at its default here


def tiny_mlm_config(data_dir: Path, **overrides) -> TrainConfig:
    """The tiny translator's run settings on a BERT-shaped encoder of the same size, filling masked tokens of the
    fixture corpus's English lines for 4 short epochs."""
    values = {**tiny_train_config(data_dir).to_dict(), **TRANSLATION_ONLY, "text_lang": "en", "epochs": 4,
              "label_smoothing": 0.0, "model": {**MLM_MODEL, "vocab_size": 120}, **overrides}
    return TrainConfig.from_dict(values)


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory, data_dir) -> Path:
    return trained_run(tmp_path_factory.mktemp("mlm") / "run", tiny_mlm_config(data_dir))


def ordinary_ids(rows: int, length: int, vocab: int, seed: int) -> torch.Tensor:
    """``[CLS] ... [SEP]`` rows of random ordinary ids, the second half of the rows cut short by padding."""
    ids = torch.randint(len(SPECIALS), vocab, (rows, length), generator=torch.Generator().manual_seed(seed))
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    ids[rows // 2:, length // 2:] = PAD_ID
    return ids


def test_the_masking_rule_chooses_15_percent_and_replaces_80_10_10():
    vocab = 3000
    ids = ordinary_ids(400, 60, vocab, 0)
    inputs, labels = mask_tokens(ids, torch.Generator().manual_seed(7), vocab)
    ordinary = ids >= len(SPECIALS)
    chosen = labels != PAD_ID
    # labels only at chosen positions, each the original token; no special token or padding is ever chosen
    assert torch.equal(labels[chosen], ids[chosen]) and not chosen[~ordinary].any()
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing else changes
    rate = float(chosen.sum() / ordinary.sum())
    assert abs(rate - 0.15) < 0.01, rate
    masked = float((inputs[chosen] == MASK_ID).float().mean())
    kept = float((inputs[chosen] == ids[chosen]).float().mean())
    replaced = 1 - masked - kept
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.015 and abs(replaced - 0.1) < 0.015, (masked, kept)
    assert int(inputs[chosen & (inputs != MASK_ID)].min()) >= len(SPECIALS)  # a random token is an ordinary one
    # a seeded draw: the same seed gives the same masks, another seed others
    again = mask_tokens(ids, torch.Generator().manual_seed(7), vocab)
    other = mask_tokens(ids, torch.Generator().manual_seed(8), vocab)
    assert torch.equal(again[0], inputs) and torch.equal(again[1], labels) and not torch.equal(other[1], labels)
    assert draw_seed(1234, 0, 3, 5) == draw_seed(1234, 0, 3, 5) != draw_seed(1234, 0, 3, 6)
    # the held-out rule: every chosen token becomes the mask token
    inputs, labels = mask_tokens(ids, torch.Generator().manual_seed(7), vocab, ALL_MASKED)
    assert bool((inputs[labels != PAD_ID] == MASK_ID).all())


def test_the_masked_token_loss_is_cross_entropy_at_the_chosen_positions_and_padding_changes_nothing():
    torch.manual_seed(0)
    vocab = 50
    model = MaskedLM(ModelConfig(**{**MLM_MODEL, "vocab_size": vocab})).eval()
    lines = EncodedPairs([[], []], [[CLS_ID, 9, 10, 11, 12, 13, 14, SEP_ID], [CLS_ID, 20, 21, SEP_ID]])
    batch = masked_batch(lines, [0, 1], vocab, 3, ALL_MASKED)
    chosen = batch.tgt_out != PAD_ID
    assert batch.target_tokens == int(chosen.sum()) > 0 and batch.tgt_in.shape == (2, 8)
    with torch.no_grad():
        _, nll = MaskedTokenLoss(model, 0.0)(None, batch.tgt_in, batch.tgt_out)
        alone = sum(float(MaskedTokenLoss(model, 0.0)(None, batch.tgt_in[i:i + 1, :n], batch.tgt_out[i:i + 1, :n])[1])
                    for i, n in ((0, 8), (1, 4)))
        logits = model(batch.tgt_in, mask=(batch.tgt_in != PAD_ID)[:, None, None, :]).logits
    expected = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID, reduction="sum")
    assert float(nll) == pytest.approx(float(expected), rel=1e-6)
    assert float(nll) == pytest.approx(alone, rel=1e-5)  # the short line's padding is hidden from every query


def test_the_wordpiece_tokenizer_has_the_specials_and_wraps_each_line(tmp_path):
    tokenizer = train_wordpiece(["A dog runs in the park.", "Two men play football."] * 5, 200, tmp_path)
    assert tokenizer.mask_token == "[MASK]" and tokenizer.mask_id == MASK_ID
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["tokenizer.json", RULES])
    ids = encode_lines(tokenizer, ["A dog runs.", "", "two men " * 40], 64).tgt
    assert len(ids) == 1 and ids[0][0] == CLS_ID and ids[0][-1] == SEP_ID  # the empty and the long line dropped
    assert tokenizer.decode(ids[0]) == "a dog runs."  # lowercased


def test_an_encoder_only_run_learns_to_fill_its_masked_tokens(mlm_run, data_dir):
    cfg = TrainConfig.from_dict(json.loads((mlm_run / "config.json").read_text()))
    assert cfg == tiny_mlm_config(data_dir) and cfg.model.kind == "encoder"
    assert (mlm_run / RULES).is_file() and not (mlm_run / "tokenizer.model").exists()
    events = read_log(mlm_run)
    assert (events[0]["event"], events[0]["train_pairs"], events[0]["val_pairs"]) == ("start", 200, 6)
    uniform = math.log(cfg.model.vocab_size)
    losses = [e["loss"] for e in events if e["event"] == "train"]
    assert losses[-1] < losses[0] and losses[-1] < uniform - 1.0, losses
    vals = [e for e in events if e["event"] == "val"]
    assert [e["epoch"] for e in vals] == [1, 2, 3, 4] and not any("val_bleu" in e for e in vals)
    assert vals[-1]["val_loss"] < vals[0]["val_loss"] < uniform
    test = events[-1]
    assert test["event"] == "test" and set(test["results"]) == {"val", "test_2016_flickr"}
    scores = test["results"]["val"]
    assert scores["lines"] == 6 and scores["masked"] > 0 and 0 <= scores["top1"] <= scores["top5"] <= 1
    card = (mlm_run / "model" / "MODEL_CARD.md").read_text()
    assert "Encoder-only Transformer" in card and "WordPiece" in card and "top-5" in card and "BLEU" not in card


def test_the_exported_encoder_loads_and_fills_a_mask(mlm_run):
    model = viz_model.load(mlm_run / "model", device="cpu")
    assert isinstance(model, viz_model.EncoderModel) and model.mask_token == "[MASK]"
    [predictions] = model.fill_mask("A man in a [MASK] shirt.", top_k=3)
    probabilities = [p for _, p in predictions]
    assert len(predictions) == 3 and probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1
    trace = model.trace("A man in a [MASK] shirt.")
    assert len(trace.encoder_attentions) == 2 and trace.source_tokens[0] == "[CLS]"


def test_a_killed_encoder_run_resumes_to_the_same_state(tmp_path, monkeypatch, mlm_run, data_dir):
    """The masks of every batch are drawn from (seed, epoch, batch): a resumed run draws the ones it would have."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("tokenizer.json", RULES):
        shutil.copyfile(mlm_run / name, run_dir / name)
    kill_at_step(monkeypatch, 27)
    with pytest.raises(Killed):
        train(tiny_mlm_config(data_dir), run_dir)
    monkeypatch.undo()
    assert torch.load(run_dir / "latest.pt", weights_only=True)["step"] < 27
    train(None, run_dir, resume=True)
    assert_same_training_state(run_dir, mlm_run)


def test_viz_model_train_and_export_run_the_shipped_encoders_config(capsys, tmp_path, data_dir):
    """configs/multi30k-mlm-en.toml names its corpus under the data root; here it reads the fixture corpus, smaller."""
    config = REPO / "configs" / "multi30k-mlm-en.toml"
    cfg = TrainConfig.from_toml(config)
    assert (cfg.data_dir, cfg.text_lang, cfg.model.kind, cfg.average_last) == ("multi30k", "en", "encoder", 1)
    small = [f"model.{key}={json.dumps(value)}" for key, value in MLM_MODEL.items() if key != "kind"]
    code, _, err = run(capsys, "train", "--config", config, "--run-dir", tmp_path / "run", f"data_dir={data_dir}",
                       "epochs=1", "vocab_size=120", "model.vocab_size=120", "device=cpu", "bf16=false",
                       "warmup_steps=2", "batch_tokens=250", *small)
    assert code == 0, err
    out = tmp_path / "exported"
    code, _, err = run(capsys, "export", tmp_path / "run", "--out", out, "--last", "1", "--dtype", "fp16",
                       "--evaluate", "val", "test_2016_flickr")
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert set(results) == {"val", "test_2016_flickr"} and set(results["val"]) == {"top1", "top5", "nll", "lines",
                                                                                   "masked"}
    assert isinstance(viz_model.load(out, device="cpu"), viz_model.EncoderModel)


@pytest.mark.parametrize("changes, fragment", [
    ({"text_lang": ""}, "an encoder-only run learns plain text lines: set text_lang"),
    ({"tgt_lang": "fr"}, "tgt_lang: settings of translation runs; an encoder-only run learns to fill masked tokens"),
    ({"init_from": "models/x"}, "init_from"),
])
def test_an_encoder_run_refuses_the_settings_of_other_runs_in_one_line(data_dir, changes, fragment):
    values = {**tiny_mlm_config(data_dir).to_dict(), **changes}
    with pytest.raises(ConfigError) as err:
        TrainConfig.from_dict(values)
    assert "\n" not in str(err.value) and fragment in str(err.value), str(err.value)
