"""The trainer on a decoder-only language model (fp32, CPU, one thread): next-token loss under the causal mask on the
English lines of the fixture corpus, its loss falling, an exact resume after a kill, an exported directory that
`viz_model.load` opens as a `LanguageModel`, the CLI and configs/tiny-lm.toml, and the kind's refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from support.cli import assert_user_error, run
from support.data import TINY_ARCHITECTURE, tiny_train_config, write_toml
from support.training import Killed, assert_same_training_state, fresh_run_dir, kill_at_step, read_log, trained_run

import viz_model
from viz_model.config import ConfigError, ModelConfig, TrainConfig
from viz_model.data.batching import pad
from viz_model.nn.causal_lm import CausalLM
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID
from viz_model.train.data import encode_texts
from viz_model.train.loop import train
from viz_model.train.objectives import NextTokenLoss

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
REPO = Path(__file__).resolve().parents[2]
LM_MODEL = {"kind": "decoder", "encoder_layers": 0, "decoder_layers": 2, "d_model": 32, "heads": 4, "kv_heads": 2,
            "d_ff": 64, "dropout": 0.1, "max_positions": 64, "positional": "rope", "norm": "pre",
            "normalization": "rms", "activation": "silu", "gated_ffn": True, "attention_bias": False,
            "ffn_bias": False, "scale_embeddings": False}
TRANSLATION_ONLY = {"eval_bleu_sentences": 1014}  # the fixture's translation setting, at its default here


def tiny_lm_config(data_dir: Path, **overrides) -> TrainConfig:
    """The tiny translator's run settings on a Llama-shaped decoder-only model of the same size, learning the
    fixture corpus's English lines for 5 short epochs (11 steps each)."""
    values = {**tiny_train_config(data_dir).to_dict(), **TRANSLATION_ONLY, "text_lang": "en", "epochs": 5,
              "label_smoothing": 0.0, "model": {**LM_MODEL, "vocab_size": 120}, **overrides}
    return TrainConfig.from_dict(values)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory, data_dir) -> Path:
    return trained_run(tmp_path_factory.mktemp("lm") / "run", tiny_lm_config(data_dir))


def test_the_next_token_loss_is_cross_entropy_and_padding_changes_nothing(tokenizer):
    torch.manual_seed(0)
    model = CausalLM(ModelConfig(**{**LM_MODEL, "vocab_size": tokenizer.vocab_size})).eval()
    lines = encode_texts(tokenizer, ["A man is running in the park.", "Two dogs."], 64).tgt
    tgt_in, tgt_out = pad([[BOS_ID, *ids] for ids in lines]), pad([[*ids, EOS_ID] for ids in lines])
    with torch.no_grad():
        _, nll = NextTokenLoss(model, 0.0)(None, tgt_in, tgt_out)
        logits = model(tgt_in).logits
        expected = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0, reduction="sum")
        alone = sum(float(NextTokenLoss(model, 0.0)(None, torch.tensor([[BOS_ID, *ids]]),
                                                     torch.tensor([[*ids, EOS_ID]]))[1]) for ids in lines)
    assert float(nll) == pytest.approx(float(expected), rel=1e-6)
    assert float(nll) == pytest.approx(alone, rel=1e-5)  # the short line's padding, after it, is never seen
    assert tgt_in.shape[1] > len(lines[1]) + 1


def test_a_decoder_only_run_learns_its_lines(lm_run, data_dir):
    cfg = TrainConfig.from_dict(json.loads((lm_run / "config.json").read_text()))
    assert cfg == tiny_lm_config(data_dir) and cfg.model.kind == "decoder"
    events = read_log(lm_run)
    start = events[0]
    assert (start["event"], start["train_pairs"], start["val_pairs"]) == ("start", 200, 6)
    uniform = math.log(cfg.model.vocab_size)  # the loss of a model that knows nothing yet
    losses = [e["loss"] for e in events if e["event"] == "train"]
    assert [e["step"] for e in events if e["event"] == "train"] == [20, 40, 55]
    assert losses == sorted(losses, reverse=True) and losses[-1] < uniform - 1.5
    vals = [e for e in events if e["event"] == "val"]
    assert [e["epoch"] for e in vals] == [1, 2, 3, 4, 5]
    assert not any("val_bleu" in e for e in vals)  # scored by its loss alone
    val_losses = [e["val_loss"] for e in vals]
    assert val_losses[0] < uniform and val_losses[-1] < val_losses[0] - 1.0
    test = events[-1]
    assert test["event"] == "test" and set(test["results"]) == {"val", "test_2016_flickr"}
    assert test["results"]["val"]["lines"] == 6
    assert test["results"]["val"]["perplexity"] == pytest.approx(math.exp(test["results"]["val"]["nll"]), rel=1e-3)
    card = (lm_run / "model" / "MODEL_CARD.md").read_text()
    assert "Decoder-only Transformer language model" in card and "perplexity" in card and "BLEU" not in card
    assert "pre-RMSNorm" in card and "gated (silu) d_ff 64" in card


def test_the_exported_model_loads_as_a_language_model_that_completes_and_traces(lm_run):
    lm = viz_model.load(lm_run / "model", device="cpu")
    assert isinstance(lm, viz_model.LanguageModel) and lm.config.kind == "decoder"
    prompt_ids = lm.tokenizer.encode("A man is")
    assert prompt_ids[0] == BOS_ID and lm.tokenizer.eos_ids == [EOS_ID]
    completion = lm.complete("A man is", max_new_tokens=8)
    assert isinstance(completion, str) and completion.strip()
    assert lm.complete("A man is", max_new_tokens=8, beam=2).strip()
    trace = lm.trace("A man is", max_new_tokens=5)
    n = len(trace.target_ids)
    assert len(prompt_ids) < n <= len(prompt_ids) + 5 and trace.target_tokens[0] == "<s>"
    assert len(trace.decoder_attentions) == 2 and trace.decoder_attentions[0].shape == (4, n, n)
    assert trace.encoder_attentions == [] and trace.cross_attentions == []
    assert len(trace.steps) == n and trace.steps[-1].top_ids
    assert trace.settings["kv_heads"] == [0, 0, 1, 1]
    assert len(lm.trace("A man is", max_new_tokens=0).target_ids) == len(prompt_ids)
    with pytest.raises(ValueError, match="no chat template"):
        lm.chat([{"role": "user", "content": "Hello"}])


def test_a_killed_decoder_only_run_resumes_to_the_same_state(tmp_path, monkeypatch, lm_run, data_dir):
    run_dir = fresh_run_dir(tmp_path / "run", lm_run)
    kill_at_step(monkeypatch, 27)  # in epoch 3 (steps 23-33); latest.pt was written at step 24
    with pytest.raises(Killed):
        train(tiny_lm_config(data_dir), run_dir)
    monkeypatch.undo()
    assert torch.load(run_dir / "latest.pt", weights_only=True)["step"] == 24
    train(None, run_dir, resume=True)
    assert_same_training_state(run_dir, lm_run)


def test_viz_model_train_trains_the_tiny_lm_config(capsys, tmp_path, data_dir, lm_run):
    """configs/tiny-lm.toml names its corpus under the data root; here it reads the fixture corpus instead, smaller."""
    cfg = TrainConfig.from_toml(REPO / "configs" / "tiny-lm.toml")
    assert (cfg.data_dir, cfg.text_lang, cfg.model.kind) == ("multi30k", "en", "decoder")
    run_dir = fresh_run_dir(tmp_path / "run", lm_run)  # its tokenizer: 120 pieces
    small = [f"model.{key}={json.dumps(value)}" for key, value in TINY_ARCHITECTURE.items() if key != "encoder_layers"]
    code, _, err = run(capsys, "train", "--config", REPO / "configs" / "tiny-lm.toml", "--run-dir", run_dir,
                       f"data_dir={data_dir}", "max_steps=4", "vocab_size=120", "model.vocab_size=120", "threads=1",
                       "device=cpu", "bf16=false", "warmup_steps=2", *small)
    assert code == 0, err
    assert torch.load(run_dir / "latest.pt", weights_only=True)["step"] == 4
    lm = viz_model.load(run_dir / "model", device="cpu")
    assert isinstance(lm, viz_model.LanguageModel) and lm.config.kv_heads == 2
    assert isinstance(lm.complete("Two dogs", max_new_tokens=3), str)


def test_viz_model_export_scores_a_language_model_by_its_loss(capsys, tmp_path, lm_run):
    out = tmp_path / "exported"
    code, _, err = run(capsys, "export", lm_run, "--out", out, "--evaluate", "val")
    assert code == 0, err
    assert (out / "model.safetensors").read_bytes() == (lm_run / "model" / "model.safetensors").read_bytes()
    results = json.loads((out / "results.json").read_text())
    assert results == {"val": read_log(lm_run)[-1]["results"]["val"]} and results["val"]["lines"] == 6
    assert isinstance(viz_model.load(out, device="cpu"), viz_model.LanguageModel)


def test_a_text_lang_file_that_is_missing_is_named(capsys, tmp_path, data_dir):
    config = tmp_path / "lm.toml"
    write_toml(config, tiny_lm_config(data_dir, text_lang="fr"))
    assert_user_error(capsys, ["train", "--config", config, "--run-dir", tmp_path / "run"], "train.fr")


@pytest.mark.parametrize("changes, fragments", [
    ({"text_lang": ""}, ["set text_lang"]),
    ({"tgt_lang": "fr", "eval_beam": 4}, ["tgt_lang, eval_beam: settings of translation runs"]),
    ({"eval_bleu_sentences": 10}, ["eval_bleu_sentences: settings of translation runs"]),
    ({"init_from": "models/x"}, ["init_from"]),
    ({"model": {**LM_MODEL, "vocab_size": 120, "forced_first_id": 5, "output_bias": True}},
     ["output_bias, forced_first_id: options of the encoder-decoder kind"]),
    ({"model": {**LM_MODEL, "vocab_size": 120, "positional": "relative"}}, ["relative"]),
    ({"model": {**TINY_ARCHITECTURE, "vocab_size": 120}}, ["text_lang ('en') is a setting of decoder-only runs"]),
    ({"model": {**TINY_ARCHITECTURE, "vocab_size": 120, "sliding_layers": [1], "rope_factor": 2.0}},
     ["rope_factor, sliding_layers: options of the decoder-only kind"]),
])
def test_each_kind_refuses_the_others_settings_in_one_line(data_dir, changes, fragments):
    values = {**tiny_train_config(data_dir).to_dict(), **TRANSLATION_ONLY, "text_lang": "en",
              "model": {**LM_MODEL, "vocab_size": 120}, **changes}
    with pytest.raises(ConfigError) as err:
        TrainConfig.from_dict(values)
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_corpora_mix_of_text_trains_and_scores_each_set(tmp_path, data_dir, lm_run):
    corpora = [{"name": "captions", "data_dir": str(data_dir), "train": "train", "val": "val"},
               {"name": "held", "data_dir": str(data_dir), "test": ["test_2016_flickr"]}]
    values = {**tiny_lm_config(data_dir).to_dict(), "corpora": corpora, "max_steps": 3}
    for single in ("data_dir", "test_prefixes"):
        del values[single]
    out = train(TrainConfig.from_dict(values), fresh_run_dir(tmp_path / "run", lm_run))
    test = read_log(out.parent)[-1]
    assert set(test["results"]) == {"captions:val", "held:test_2016_flickr"}
    assert test["results"]["held:test_2016_flickr"]["lines"] == 4


@pytest.mark.gpu
def test_a_decoder_only_run_trains_on_the_gpu_under_bf16_autocast(tmp_path, data_dir):
    """CUDA, bf16 autocast (fp32 weights and loss): the loss falls and the exported fp32 model serves on the CPU."""
    exported = train(tiny_lm_config(data_dir, device="cuda", bf16=True), tmp_path / "run")
    events = read_log(tmp_path / "run")
    assert events[0]["device"].startswith("cuda") and events[0]["precision"] == "bf16 autocast", events[0]
    losses = [e["loss"] for e in events if e["event"] == "train"]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0], losses
    lm = viz_model.load(exported, device="cpu")
    assert next(lm.network.parameters()).dtype == torch.float32
    assert isinstance(lm.complete("A man is", max_new_tokens=4), str)
