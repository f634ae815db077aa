"""training_facts.json: the training recipe as data, written by export, checked on load, agreeing with the cards."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import viz_model
from viz_model.cli.main import main
from viz_model.config import ModelConfig, TrainConfig
from viz_model.modeldir.training_facts import (
    TRAINING_FACTS,
    FactsError,
    TrainingFacts,
    facts_from_run,
    load_training_facts,
    read_log,
)

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.parent for p in (REPO / "assets").glob("*/config.json"))
EVENTS = [{"event": "start", "step": 0, "device": "cpu", "precision": "fp32"},
          {"event": "val", "epoch": 1, "step": 100, "val_loss": 4.0, "val_bleu": 2.5, "val_chrf": 20.0},
          {"event": "resume", "step": 150, "device": "cpu", "precision": "bf16 autocast"},
          {"event": "val", "epoch": 2, "step": 200, "val_loss": 3.5}]


def config(**changes) -> TrainConfig:
    return TrainConfig(model=ModelConfig(vocab_size=64, d_model=32, heads=2, d_ff=64), warmup_steps=40,
                       lr_peak=1e-3, epochs=3, cooldown_epochs=1, max_len=50, **changes)


def test_facts_of_a_run_round_trip():
    facts = facts_from_run(config(), EVENTS)
    assert (facts.trained_epochs, facts.steps, facts.steps_per_epoch, facts.max_len) == (2, 200, 100, 50)
    assert [(v.epoch, v.step, v.loss, v.bleu) for v in facts.validation] == [(1, 100, 4.0, 2.5), (2, 200, 3.5, None)]
    assert facts.precision_summary() == "fp32 from step 0, bf16 autocast from step 150"
    again = TrainingFacts.from_dict(json.loads(facts.to_json()))
    assert again == facts
    schedule = facts.schedule_config()
    assert (schedule.warmup_steps, schedule.lr_peak, schedule.epochs, schedule.cooldown_epochs) == (40, 1e-3, 3, 1)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("warmup_steps"), "field 'warmup_steps' must be an integer, got None"),
    (lambda d: d.update(steps=1.5), "field 'steps' must be an integer, got 1.5"),
    (lambda d: d.update(lr_peak="0.001"), "field 'lr_peak' must be a number"),
    (lambda d: d.update(label_smoothing=-0.1), "field 'label_smoothing' must be a finite number >= 0"),
    (lambda d: d.update(seed=True), "field 'seed' must be an integer, got True"),
    (lambda d: d.update(version=2), "version 2 is not supported"),
    (lambda d: d.update(precision={}), "field 'precision' must be a list"),
    (lambda d: d["precision"].append({"from_step": 5}), "precision: field 'precision' must be a non-empty string"),
    (lambda d: d["validation"].append({"epoch": 3, "step": 300}), "validation: field 'loss' must be a number"),
    (lambda d: d.update(cooldown_epochs=9), "the schedule it describes is not valid"),
])
def test_a_bad_field_is_named(change, message):
    data = json.loads(facts_from_run(config(), EVENTS).to_json())
    change(data)
    with pytest.raises(FactsError, match=re.escape(message)):
        TrainingFacts.from_dict(data, "somewhere.json")
    with pytest.raises(FactsError, match="not a training facts object"):
        TrainingFacts.from_dict([1, 2])


def test_a_broken_facts_file_warns_and_the_model_still_serves(app_model, tmp_path):
    directory = tmp_path / "m"
    shutil.copytree(app_model.directory, directory)
    assert viz_model.load(directory, device="cpu").training_facts is None  # none written: not known
    (directory / TRAINING_FACTS).write_text('{"version": 1, "warmup_steps": "many"')
    with pytest.warns(UserWarning, match=f"{TRAINING_FACTS}: cannot be read as JSON"):
        model = viz_model.load(directory, device="cpu")
    assert model.training_facts is None and model.translate("a dog.", beam=1) is not None
    (directory / TRAINING_FACTS).unlink()
    (directory / TRAINING_FACTS).symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text(facts_from_run(config(), EVENTS).to_json())
    with pytest.raises(FactsError, match="outside the model directory"):
        load_training_facts(directory)


def test_export_writes_the_facts_the_card_states(finished_run):
    """The exported directory's facts equal those of the run's config and log, and the card says the same."""
    model_dir = finished_run / "model"
    facts = load_training_facts(model_dir)
    cfg = TrainConfig.from_dict(json.loads((finished_run / "config.json").read_text()))
    assert facts == facts_from_run(cfg, read_log(finished_run / "log.jsonl"))
    assert facts.trained_epochs == cfg.epochs and facts.steps > 0 and len(facts.validation) == cfg.epochs
    card = (model_dir / "MODEL_CARD.md").read_text()
    assert f"with {facts.warmup_steps} warm-up steps" in card
    assert f"trained for {facts.trained_epochs} epochs ({facts.steps} steps)" in card
    assert f"label smoothing {facts.label_smoothing}" in card and f"at most {facts.max_len} pieces" in card
    assert viz_model.load(model_dir, device="cpu").training_facts == facts


@pytest.mark.parametrize("directory", SHIPPED, ids=lambda p: p.name)
def test_each_shipped_model_has_facts_that_agree_with_its_card(directory):
    facts = load_training_facts(directory)
    assert facts is not None, f"{directory.name} ships no {TRAINING_FACTS}"
    card = (directory / "MODEL_CARD.md").read_text()
    assert f"schedule with {facts.warmup_steps} warm-up steps, peak lr {facts.lr_peak}" in card
    assert f"trained for {facts.trained_epochs} epochs ({facts.steps} steps)" in card
    assert f"dropout {facts.dropout}, label smoothing {facts.label_smoothing}, seed {facts.seed}" in card
    if facts.cooldown_epochs:
        assert f"cooldown to zero over the last {facts.cooldown_epochs} epochs" in card
    log = read_log(directory / "training_log.jsonl")
    assert [v.loss for v in facts.validation] == [e["val_loss"] for e in log if e.get("event") == "val"]


def test_cli_writes_facts_for_an_older_model_directory(finished_run, tmp_path, capsys):
    directory = tmp_path / "old"
    shutil.copytree(finished_run / "model", directory)
    expected = load_training_facts(directory)
    (directory / TRAINING_FACTS).unlink()
    config_file = tmp_path / "run.toml"
    cfg = json.loads((finished_run / "config.json").read_text())
    config_file.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in cfg.items()
                                     if not isinstance(v, (dict, list)) and v is not None)
                           + "\n[model]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in cfg["model"].items()
                                                      if v is not None and not isinstance(v, list)) + "\n")
    assert main(["facts", str(directory), "--config", str(config_file)]) == 0
    assert load_training_facts(directory) == expected
    (directory / "training_log.jsonl").write_text('{"event": "start"}\n')
    assert main(["facts", str(directory), "--config", str(config_file)]) == 2
    assert "no validation event" in capsys.readouterr().err


def test_no_page_reads_the_card_for_facts():
    """The app shows the card to people; nothing in it parses the card's prose."""
    for path in (REPO / "app").rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"re\.\w+\([^)]*card", text), f"{path} searches the model card"


def test_an_exported_card_names_the_file_of_each_figure(finished_run, tmp_path):
    """The card export writes passes the figure check against its own directory's files (as the shipped cards
    are checked), and names no host."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import docs_figures

    from viz_model.train.card import paper_section

    model_dir = finished_run / "model"
    card = (model_dir / "MODEL_CARD.md").read_text()
    assert "<!-- fig training_log.jsonl *.wall_time max /3600 .2f --> h" in card
    assert "<!-- fig training_log.jsonl *.tokens_per_s median ,.0f --> target tokens/s" in card
    assert "host" not in card
    problems = docs_figures.check_markers(card, "MODEL_CARD.md", model_dir) + docs_figures.unmarked(card, "card")
    assert not problems, "\n".join(map(str, problems))
    results = {"wmt:newstest2014/beam1": {"bleu": 4.01}, "wmt:newstest2014/beam4": {"bleu": 4.4}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    cfg = TrainConfig.from_dict(json.loads((finished_run / "config.json").read_text()))
    section = "\n".join(paper_section(cfg, results, {"train_pairs": 1000}))
    assert "**4.40<!-- fig results.json wmt:newstest2014/beam4.bleu .2f --> BLEU**" in section
    assert docs_figures.check_markers(section, "MODEL_CARD.md", tmp_path) == []
    assert docs_figures.unmarked(section, "card") == []
