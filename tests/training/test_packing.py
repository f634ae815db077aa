"""A decoder-only run's lines packed into long sequences (`pack_len`), some repeated inside their sequence
(`pack_repeat`), random spans and their copies (`pack_spans`), and the checkpoint series a run saves every
`series_every_steps` (issue 60, items 3 and 4)."""

from __future__ import annotations

import json

import pytest
import torch
from test_train_lm import tiny_lm_config

import viz_model
from viz_model.config import ConfigError
from viz_model.modeldir.series import SERIES_FILE, folder_series
from viz_model.modeldir.training_facts import facts_from_run
from viz_model.tokenization.tokenizer import EOS_ID, SPECIAL_IDS
from viz_model.train.card import model_card
from viz_model.train.data import EncodedPairs, collate
from viz_model.train.export import export_run
from viz_model.train.loop import train
from viz_model.train.packing import SPAN_LENGTHS, pack_texts

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
LINES = [[10 + i, 200 + i % 7, 300 + i] for i in range(40)] + [[5] * 9, [6]]  # distinct lines of 1 to 9 ids


def lines_of(sequence: list[int]) -> list[list[int]]:
    """A packed sequence split back into its lines (at each ``</s>``)."""
    found, current = [], []
    for token in sequence:
        if token == EOS_ID:
            found.append(current)
            current = []
        else:
            current.append(token)
    return [*found, current]


def test_every_line_is_packed_once_in_sequences_that_fit():
    data = EncodedPairs([[] for _ in LINES], LINES)
    packed = pack_texts(data, 16)
    assert all(src == [] for src in packed.src)
    assert all(len(seq) + 1 <= 16 for seq in packed.tgt)  # with <s> (or </s>) added by collate
    assert sorted(line for seq in packed.tgt for line in lines_of(seq)) == sorted(LINES)
    assert len(packed) < len(LINES) / 3  # several lines a sequence
    batch = collate(packed, [0])
    assert batch.tgt_in.shape[1] <= 16 and int(batch.tgt_out[0, len(packed.tgt[0])]) == EOS_ID
    assert pack_texts(data, 16).tgt == packed.tgt and pack_texts(data, 16, seed=1).tgt != packed.tgt


def test_a_repeated_line_is_a_copy_of_an_earlier_line_of_its_sequence():
    data = EncodedPairs([[] for _ in LINES], LINES)
    packed = pack_texts(data, 64, repeat=0.5, seed=3)
    fresh, repeats = [], 0
    for seq in packed.tgt:
        seen: list[list[int]] = []
        for line in lines_of(seq):
            if line in seen:
                repeats += 1
            else:
                fresh.append(line)
            seen.append(line)
    assert sorted(fresh) == sorted(LINES) and repeats > 10  # every line once, and copies beside them
    assert all(len(seq) + 1 <= 64 for seq in packed.tgt)


def test_a_random_span_is_followed_by_its_copy_and_every_line_is_still_packed_once():
    data = EncodedPairs([[] for _ in LINES], LINES)
    packed = pack_texts(data, 128, repeat=0.2, seed=3, spans=0.3, vocab_size=500)
    captions, spans = [], []
    for line in (line for seq in packed.tgt for line in lines_of(seq)):
        (captions if line in LINES else spans).append(line)
    assert sorted(set(map(tuple, captions))) == sorted(map(tuple, LINES)) and len(spans) > 5
    for span in spans:
        half = len(span) // 2
        assert span[:half] == span[half:] and SPAN_LENGTHS[0] <= half <= SPAN_LENGTHS[1]
        assert len(set(span[:half])) == half and not set(span) & set(SPECIAL_IDS) and max(span) < 500
    assert all(len(seq) + 1 <= 128 for seq in packed.tgt)
    no_spans = pack_texts(data, 128, repeat=0.2, seed=3).tgt
    assert no_spans == pack_texts(data, 128, repeat=0.2, seed=3, vocab_size=500).tgt != packed.tgt


def test_a_line_too_long_to_pack_is_dropped_and_bad_settings_are_refused():
    data = EncodedPairs([[], []], [[7] * 20, [8, 9]])
    assert pack_texts(data, 8).tgt == [[8, 9]]
    with pytest.raises(ValueError, match="pack_len must be at least 2"):
        pack_texts(data, 1)
    with pytest.raises(ValueError, match="repeat must be a chance"):
        pack_texts(data, 8, repeat=1.0)
    with pytest.raises(ValueError, match="spans must be a chance"):
        pack_texts(data, 8, repeat=0.5, spans=0.5, vocab_size=100)
    with pytest.raises(ValueError, match="random spans need a vocabulary of at least 36 ids"):
        pack_texts(data, 8, spans=0.1, vocab_size=20)


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"pack_len": 128}, "pack_len (128) exceeds max_len (64)"),
    ({"pack_repeat": 0.2}, "pack_repeat (0.2) repeats lines inside packed sequences: set pack_len"),
    ({"pack_spans": 0.2}, "pack_spans (0.2) adds random spans to packed sequences: set pack_len"),
    ({"pack_len": 32, "pack_repeat": 0.5, "pack_spans": 0.5},
     "pack_repeat (0.5) and pack_spans (0.5) must sum to less than 1: no caption would be packed"),
])
def test_packing_settings_are_checked_in_one_line(data_dir, changes, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")) as err:
        tiny_lm_config(data_dir, max_len=64, **changes)
    assert "\n" not in str(err.value)


def test_the_card_discloses_the_copying_curriculum(data_dir):
    cfg = tiny_lm_config(data_dir, max_len=64, pack_len=64, pack_repeat=0.4, pack_spans=0.3)
    card = model_card("lm", cfg, 1000, [], facts_from_run(cfg, []), {}, [])
    assert ("each line after a sequence's first is, with chance 0.4, a copy of one of its earlier lines; with chance "
            "0.3, a span of 8 to 32 random pieces followed by its copy instead (a copying curriculum); validation one "
            "line a sequence") in card
    assert "copying curriculum" not in model_card("lm", tiny_lm_config(data_dir, max_len=64, pack_len=64), 1000, [],
                                                  facts_from_run(cfg, []), {}, [])


def test_a_packed_run_saves_a_series_that_opens_step_by_step(tmp_path, data_dir):
    cfg = tiny_lm_config(data_dir, epochs=1, pack_len=64, pack_repeat=0.3, series_every_steps=2)
    run_dir = tmp_path / "run"
    train(cfg, run_dir)
    card = (run_dir / "model" / "MODEL_CARD.md").read_text()
    assert ("- training lines packed into sequences of up to 64 positions (each line ended by `</s>`); each line after "
            "a sequence's first is, with chance 0.3, a copy of one of its earlier lines; validation one line a "
            "sequence") in card
    start = json.loads((run_dir / "log.jsonl").read_text().splitlines()[0])
    assert start["train_pairs"] < 200 / 3  # the fixture's 200 lines, packed several to a sequence
    steps = [json.loads(line)["step"] for line in (run_dir / "log.jsonl").read_text().splitlines()
             if json.loads(line)["event"] == "val"]
    series = folder_series(run_dir / "series")
    assert series.steps == tuple(range(0, steps[-1] + 1, 2)) and (run_dir / "series" / SERIES_FILE).is_file()
    first, last = (viz_model.load(series.place(s), device="cpu") for s in (series.steps[0], series.steps[-1]))
    assert isinstance(last, viz_model.LanguageModel) and first.config == last.config
    before, after = first.network.state_dict(), last.network.state_dict()
    assert before.keys() == after.keys() and not all(before[k].equal(after[k]) for k in before)
    # a series checkpoint exported alone: its weights, its log and facts up to its step, the card naming it
    out = export_run(run_dir, tmp_path / "step4", step=4, dtype="fp16")
    card = (out / "MODEL_CARD.md").read_text()
    assert "steps); final weights = the checkpoint of step 4 (series/step-000004), not averaged" in card
    events = [json.loads(line) for line in (out / "training_log.jsonl").read_text().splitlines()]
    assert events[0]["event"] == "start" and all(e["step"] <= 4 for e in events if e["event"] in ("train", "val"))
    assert steps[-1] > 4  # the run went on past it
    assert json.loads((out / "training_facts.json").read_text())["steps"] == 4
    exported, saved = viz_model.load(out, device="cpu"), viz_model.load(series.place(4), device="cpu")
    ids = saved.encode("A man runs.")
    assert torch.allclose(exported.forced_pass(ids).logits, saved.forced_pass(ids).logits, atol=1e-2)
    with pytest.raises(ConfigError, match="no series checkpoint of step 5"):
        export_run(run_dir, tmp_path / "step5", step=5)
