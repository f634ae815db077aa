"""The training recipe with an encoder open (issue 59): the shipped encoder's run (`viz-model train`, masked-language
model) drawn from its own log, with the masked-token loss, perplexity and held-out accuracy and the stack's shapes for
the text; an imported encoder without a log says so in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.app import arr, charts, messages
from support.app_encoders import encoder_page

import viz_model
from app.views.training.training_mlm import held_out_scores
from viz_model.modeldir.shipped import ASSETS_DIR, SHIPPED_ENCODER

SENTENCE = "A man in a blue shirt is [MASK] a guitar."


def test_training_draws_the_shipped_encoders_run_from_its_log(monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)  # the shipped models
    at = encoder_page("training", SHIPPED_ENCODER, sentence=SENTENCE)
    assert [t.value for t in at.title] == ["The training recipe"] and not at.error
    curves = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Training curves"))
    panels = [a["text"] for a in curves["layout"]["annotations"]]
    assert "loss (per masked token)" in panels and "validation perplexity" in panels
    directory = ASSETS_DIR / SHIPPED_ENCODER
    events = [json.loads(line) for line in (directory / "training_log.jsonl").read_text().splitlines()]
    val = [e for e in events if e["event"] == "val"]
    ppl = next(d for d in curves["data"] if d["name"] == "validation perplexity")
    np.testing.assert_allclose(arr(ppl["y"]), np.exp([e["val_loss"] for e in val]), rtol=1e-9)
    gap = next(m for m in at.metric if m.label.startswith("Largest gap"))
    assert float(gap.value) < 1e-9  # the schedule drawn is the one the model logged (its training_facts.json)
    scores = next(d.value for d in at.dataframe if "top-1 accuracy" in d.value.columns)
    logged = json.loads((directory / "results.json").read_text())  # the card's held-out scores, written by the run
    assert scores["held-out set"].tolist() == ["val"]
    assert scores["top-1 accuracy"][0] == logged["val"]["top1"] and scores["top-5 accuracy"][0] == logged["val"]["top5"]
    assert scores["perplexity"][0] == pytest.approx(np.exp(logged["val"]["nll"]))
    model = viz_model.load(directory, device="cpu")
    n, cfg = len(model.encode(SENTENCE)), model.config
    table = next(d.value for d in at.dataframe if "stage" in d.value.columns)
    shapes = dict(zip(table["stage"], table["shape"]))
    assert shapes["token ids"] == f"1 × {n}"
    assert shapes["weights softmax(QKᵀ/√d_k)"] == f"1 × {cfg.heads} × {n} × {n}"
    assert shapes["logits"] == f"1 × {n} × {cfg.vocab_size}"


def test_training_of_an_imported_encoder_without_a_log_is_one_line(encoders):
    at = encoder_page("training", "bert", sentence=SENTENCE)
    assert "bert has no training_log.jsonl: it was not trained here with `viz-model train`" in messages(at)
    assert len(at.info) == 1 and not at.error and not charts(at)


def test_held_out_scores_read_the_last_test_event_and_nothing_without_one():
    events = [{"event": "test", "results": {"val": {"top1": 0.1, "top5": 0.2, "nll": 1.0, "lines": 3, "masked": 4}}},
              {"event": "test", "results": {"val": {"top1": 0.5, "top5": 0.7, "nll": 2.0, "lines": 3, "masked": 4}}}]
    scores = held_out_scores(events)
    assert scores.to_dict("records") == [{"held-out set": "val", "sentences": 3, "masked tokens": 4,
                                          "top-1 accuracy": 0.5, "top-5 accuracy": 0.7, "NLL": 2.0,
                                          "perplexity": pytest.approx(np.exp(2.0))}]
    assert held_out_scores([{"event": "train", "step": 1, "loss": 3.0}]).empty
