"""The training pipeline on a tiny config: outputs of a run, exact resume after a kill, errors before training."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from support.data import make_pairs, tiny_train_config, write_lines, write_split, write_toml
from support.training import (
    Killed,
    assert_same_training_state,
    fresh_run_dir,
    kill_at_step,
    kill_in_end_of_epoch,
    kill_while_writing_latest,
    read_log,
)

import viz_model
from viz_model.config import ConfigError, TrainConfig
from viz_model.config.recipe import learning_rate
from viz_model.data.textfiles import DataError, open_text, read_parallel
from viz_model.modeldir import checkpoint
from viz_model.train import loop, runtime
from viz_model.train import resume as resume_policy
from viz_model.train.data import EncodedPairs, collate, encode_pairs, make_batches
from viz_model.train.loop import train
from viz_model.train.objectives import LabelSmoothedLoss

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
REPO = Path(__file__).resolve().parents[2]


# --- one complete run ------------------------------------------------------------------------------
def test_a_short_run_writes_config_log_checkpoints_and_model(finished_run, data_dir):
    run = finished_run
    for name in ("config.json", "tokenizer.model", "latest.pt", "log.jsonl", "model"):
        assert (run / name).exists(), name
    cfg = TrainConfig.from_dict(json.loads((run / "config.json").read_text()))
    assert cfg == tiny_train_config(data_dir)  # the resolved config is saved with the run
    epochs = sorted(p.name for p in (run / "epochs").glob("epoch_*.safetensors"))
    assert epochs == ["epoch_001.safetensors", "epoch_002.safetensors"]
    assert not list(run.rglob("*.tmp")) and not list(run.rglob(".average*"))

    events = read_log(run)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "test" and kinds.count("val") == 2
    start = events[0]
    assert (start["world"], start["train_pairs"], start["val_pairs"]) == (1, 200, 6)
    trains = [e for e in events if e["event"] == "train"]
    assert trains and all({"step", "loss", "lr", "tokens_per_s", "wall_time"} <= set(e) for e in trains)
    assert all(math.isfinite(e["loss"]) and e["lr"] > 0 for e in trains)
    vals = [e for e in events if e["event"] == "val"]
    assert [e["epoch"] for e in vals] == [1, 2]
    assert all({"val_loss", "val_bleu", "val_chrf", "step", "wall_time"} <= set(e) for e in vals)
    assert vals[1]["val_loss"] < vals[0]["val_loss"]  # it learns something
    test = events[-1]
    assert set(test["results"]) == {"val/beam1", "val/beam4", "test_2016_flickr/beam1", "test_2016_flickr/beam4"}
    assert test["averaged"] == epochs
    state = torch.load(run / "latest.pt", weights_only=True)
    assert state["step"] == vals[-1]["step"] and state["epoch"] == 2


def test_the_exported_model_is_the_average_of_the_last_epochs(finished_run):
    model_dir = finished_run / "model"
    for name in ("model.safetensors", "config.json", "tokenizer.model", "training_log.jsonl"):
        assert (model_dir / name).is_file(), name
    assert (model_dir / "tokenizer.model").read_bytes() == (finished_run / "tokenizer.model").read_bytes()
    averaged = None
    paths = sorted((finished_run / "epochs").glob("epoch_*.safetensors"))
    for path in paths:
        tensors = load_file(str(path))
        averaged = {k: v.double() + (averaged[k] if averaged else 0) for k, v in tensors.items()}
    exported = load_file(str(model_dir / "model.safetensors"))
    assert exported.keys() == averaged.keys()
    for name, tensor in exported.items():
        torch.testing.assert_close(tensor, (averaged[name] / len(paths)).float(), atol=1e-7, rtol=0, msg=name)
    model = viz_model.load(model_dir, device="cpu")
    assert isinstance(model.translate("A man is running."), str)
    trace = model.trace("A man is running.", beam=2)
    assert len(trace.encoder_attentions) == model.config.encoder_layers


def test_learning_rate_schedule_is_the_papers():
    cfg = TrainConfig(model={"d_model": 64, "heads": 4, "vocab_size": 100}, warmup_steps=100)
    for step in (1, 50, 100, 101, 400, 10_000):
        expected = 64 ** -0.5 * min(step ** -0.5, step * 100 ** -1.5)
        assert learning_rate(step, cfg) == pytest.approx(expected)
    assert max(range(1, 400), key=lambda s: learning_rate(s, cfg)) == 100  # peak at the end of warm-up
    peaked = TrainConfig(model={"d_model": 64, "heads": 4, "vocab_size": 100}, warmup_steps=100, lr_peak=1e-3)
    assert learning_rate(100, peaked) == pytest.approx(1e-3)
    assert learning_rate(400, peaked) == pytest.approx(5e-4)  # inverse square root decay after the peak
    assert learning_rate(0, cfg) == learning_rate(1, cfg)


def test_label_smoothed_loss_matches_cross_entropy(random_net):
    src = torch.tensor([[5, 6, 7, 3], [8, 3, 0, 0]])
    tgt_in = torch.tensor([[2, 9, 10], [2, 11, 0]])
    tgt_out = torch.tensor([[9, 10, 3], [11, 3, 0]])
    loss, nll = LabelSmoothedLoss(random_net, 0.1)(src, tgt_in, tgt_out)
    logits = random_net(src, tgt_in).logits
    keep = tgt_out != 0
    expected = F.cross_entropy(logits[keep], tgt_out[keep], label_smoothing=0.1, reduction="sum")
    torch.testing.assert_close(loss, expected, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(nll, F.cross_entropy(logits[keep], tgt_out[keep], reduction="sum"), atol=1e-4,
                               rtol=1e-5)


@pytest.mark.parametrize("scenario", ["mid-epoch", "writing-latest", "end-of-epoch", "before-first-checkpoint"])
def test_killed_and_resumed_run_equals_uninterrupted(tmp_path, monkeypatch, finished_run, data_dir, scenario):
    cfg = tiny_train_config(data_dir)
    run = fresh_run_dir(tmp_path / "run", finished_run)
    if scenario == "mid-epoch":
        kill_at_step(monkeypatch, 23)  # epoch 2; latest.pt was written at step 20
    elif scenario == "writing-latest":
        kill_while_writing_latest(monkeypatch, nth=3)  # the third latest.pt write: step 12
    elif scenario == "end-of-epoch":
        kill_in_end_of_epoch(monkeypatch)
    else:
        kill_at_step(monkeypatch, 3)  # before any latest.pt exists
    with pytest.raises(Killed):
        train(cfg, run)
    monkeypatch.undo()
    assert not (run / "model").exists()
    if scenario == "before-first-checkpoint":
        assert not (run / "latest.pt").exists()
    else:
        state = torch.load(run / "latest.pt", weights_only=True)  # never a corrupt latest.pt
        assert 0 < state["step"] < 34
        if scenario == "writing-latest":
            assert state["step"] == 8  # the interrupted write left the previous checkpoint in place
            (run / ".latest.pt.leftover.tmp").write_bytes(b"half a checkpoint")  # what SIGKILL would leave
        with pytest.raises(ConfigError, match="--resume"):
            train(cfg, run)  # a started run is only continued on purpose
    train(None, run, resume=True)  # the saved config is used on resume
    assert_same_training_state(run, finished_run)
    events = read_log(run)
    starts = [e["event"] for e in events].count("start")
    assert starts == (2 if scenario == "before-first-checkpoint" else 1)
    steps = [e["step"] for e in events if e["event"] == "train"]
    assert steps == sorted(set(steps))  # steps replayed after the kill are logged once, not twice
    assert [e["step"] for e in events if e["event"] == "train"] == \
        [e["step"] for e in read_log(finished_run) if e["event"] == "train"]


def test_resume_by_another_number_of_processes_goes_on_from_the_same_batch(tmp_path, monkeypatch, finished_run,
                                                                           data_dir):
    """latest.pt counts each process's own batches: a state saved by 3 processes after 1 step each is 3 batches
    into the epoch, so one process goes on from batch 3 and ends exactly where an uninterrupted run does."""
    run = fresh_run_dir(tmp_path / "run", finished_run)
    kill_at_step(monkeypatch, 23)  # latest.pt at step 20: epoch 2, batch 3
    with pytest.raises(Killed):
        train(tiny_train_config(data_dir), run)
    monkeypatch.undo()
    state = torch.load(run / "latest.pt", weights_only=True)
    assert (state["epoch"], state["batch_index"], state["world"]) == (1, 3, 1)
    torch.save({**state, "batch_index": 1, "world": 3}, run / "latest.pt")
    train(None, run, resume=True)
    assert_same_training_state(run, finished_run)


def test_resume_by_a_number_of_processes_that_cannot_split_the_rest_is_refused():
    assert resume_policy.resumed_batch_index({"epoch": 1, "batch_index": 3, "world": 2}, 3) == 2
    # at an epoch boundary any number goes on
    assert resume_policy.resumed_batch_index({"epoch": 1, "batch_index": 0, "world": 2}, 3) == 0
    # states saved before the count was
    assert resume_policy.resumed_batch_index({"epoch": 1, "batch_index": 5}, 1) == 5
    with pytest.raises(ConfigError, match=r"3 batches into epoch 2, trained by 1 process; 2 processes .* resume "
                                          r"with 1 process \(or a number that divides 3\)"):
        resume_policy.resumed_batch_index({"epoch": 1, "batch_index": 3, "world": 1}, 2)


def test_a_finished_run_trained_on_equals_a_longer_run(tmp_path, data_dir, finished_run):
    """--resume RUN epochs=3: one more epoch; the schedule and data order do not depend on the total, so the result
    is the run that was given 3 epochs from the start."""
    longer = fresh_run_dir(tmp_path / "longer", finished_run)
    train(tiny_train_config(data_dir, epochs=3), longer)
    run = shutil.copytree(finished_run, tmp_path / "run")
    train(None, run, resume=True, changes=["epochs=3"])
    assert json.loads((run / "config.json").read_text())["epochs"] == 3
    assert sorted(p.name for p in (run / "epochs").iterdir()) == ["epoch_002.safetensors", "epoch_003.safetensors"]
    a, b = torch.load(run / "latest.pt", weights_only=True), torch.load(longer / "latest.pt", weights_only=True)
    assert (a["step"], a["epoch"]) == (b["step"], b["epoch"])
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    exported = load_file(str(run / "model" / "model.safetensors"))
    expected = load_file(str(longer / "model" / "model.safetensors"))
    assert all(torch.equal(exported[k], expected[k]) for k in expected)  # the average of epochs 2-3
    events = read_log(run)
    assert [e["epoch"] for e in events if e["event"] == "val"] == [1, 2, 3]
    assert [e["changes"] for e in events if e["event"] == "resume"] == [["epochs=3"]]
    assert [e["event"] for e in events].count("test") == 2  # scored at the end of each part


def test_resuming_a_finished_run_changes_nothing(tmp_path, finished_run):
    run = shutil.copytree(finished_run, tmp_path / "run")
    shutil.rmtree(run / "model")
    train(None, run, resume=True)
    assert_same_training_state(run, finished_run)


@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume(tmp_path, finished_run, data_dir):
    """A real SIGKILL of `python -m viz_model train` as soon as its first checkpoint exists, then --resume."""
    run = fresh_run_dir(tmp_path / "run", finished_run)
    config = tmp_path / "tiny.toml"
    write_toml(config, tiny_train_config(data_dir))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "viz_model", "train", "--config", str(config), "--run-dir",
                             str(run)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while proc.poll() is None and not (run / "latest.pt").exists():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.01)
    finally:
        proc.kill()
        proc.wait()
    if (run / "model").exists():
        pytest.skip("the run finished before it could be killed")
    assert proc.returncode != 0
    train(None, run, resume=True)
    assert_same_training_state(run, finished_run)


# --- bf16 autocast: on CUDA and on CPUs with native bf16 -------------------------------------------------------
def test_bf16_autocast_is_used_on_cuda_and_on_cpus_with_native_bf16(monkeypatch):
    on, off = TrainConfig(bf16=True), TrainConfig(bf16=False)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: True)
    assert runtime.bf16_autocast_used(cpu, on) and runtime.bf16_autocast_used(cuda, on)
    assert not runtime.bf16_autocast_used(cpu, off) and not runtime.bf16_autocast_used(cuda, off)
    with runtime.autocast_for(cpu, runtime.bf16_autocast_used(cpu, on)):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: False)  # emulated bf16 would be slower than fp32
    assert not runtime.bf16_autocast_used(cpu, on)
    with runtime.autocast_for(cpu, runtime.bf16_autocast_used(cpu, on)):
        assert not torch.is_autocast_enabled("cpu")


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory, data_dir, finished_run) -> Path:
    """The tiny run of `finished_run` (same tokenizer and seed) trained under CPU bf16 autocast."""
    run = fresh_run_dir(tmp_path_factory.mktemp("bf16") / "run", finished_run)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runtime, "cpu_has_native_bf16", lambda: True)
        train(tiny_train_config(data_dir, bf16=True), run)
    return run


def test_a_bf16_run_learns_like_fp32_and_keeps_fp32_weights(bf16_run, finished_run):
    events = read_log(bf16_run)
    assert events[0]["precision"] == "bf16 autocast" and read_log(finished_run)[0]["precision"] == "fp32"
    vals = [e["val_loss"] for e in events if e["event"] == "val"]
    fp32 = [e["val_loss"] for e in read_log(finished_run) if e["event"] == "val"]
    assert vals[1] < vals[0]
    assert vals == pytest.approx(fp32, rel=0.03)  # same seed and batches: the same curve within bf16 rounding
    assert vals != fp32  # and it did run in bf16
    weights = load_file(str(bf16_run / "model" / "model.safetensors"))
    assert {t.dtype for t in weights.values()} == {torch.float32}
    card = (bf16_run / "model" / "MODEL_CARD.md").read_text()
    assert "target tokens/s, bf16 autocast" in card


def test_killed_and_resumed_bf16_run_equals_uninterrupted(tmp_path, monkeypatch, data_dir, finished_run, bf16_run):
    run = fresh_run_dir(tmp_path / "run", finished_run)
    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: True)
    kill_at_step(monkeypatch, 23)
    with pytest.raises(Killed):
        train(tiny_train_config(data_dir, bf16=True), run)
    monkeypatch.setattr(loop, "learning_rate", learning_rate)
    train(None, run, resume=True)
    assert_same_training_state(run, bf16_run)
    resumed = [e for e in read_log(run) if e["event"] == "resume"]
    assert [(e["step"], e["precision"]) for e in resumed] == [(20, "bf16 autocast")]


def killed_at_step_23(monkeypatch, cfg: TrainConfig, run: Path, native_bf16: bool) -> None:
    """Train `cfg` in `run` on a CPU with or without native bf16 until the kill in step 23 (latest.pt: step 20)."""
    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: native_bf16)
    kill_at_step(monkeypatch, 23)
    with pytest.raises(Killed):
        train(cfg, run)
    monkeypatch.setattr(loop, "learning_rate", learning_rate)


def test_a_resumed_run_keeps_its_precision_unless_told(tmp_path, monkeypatch, data_dir, finished_run, capsys):
    """bf16 = true, started where bf16 is emulated (so in fp32), resumed where it is native: still fp32 (an exact
    continuation, with a hint on stderr); bf16=true given on resume switches it, and the card says from when."""
    cfg = tiny_train_config(data_dir, bf16=True)
    exact = fresh_run_dir(tmp_path / "exact", finished_run)
    killed_at_step_23(monkeypatch, cfg, exact, native_bf16=False)
    switched = shutil.copytree(exact, tmp_path / "switched")
    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: True)
    train(None, exact, resume=True)
    assert "trained in fp32 and continues in fp32" in capsys.readouterr().err
    assert_same_training_state(exact, finished_run)  # the fp32 run, bit for bit
    train(None, switched, resume=True, changes=["bf16=true"])
    resumed = [e for e in read_log(switched) if e["event"] == "resume"]
    assert [(e["step"], e["precision"], e["changes"]) for e in resumed] == [(20, "bf16 autocast", ["bf16=true"])]
    assert torch.load(switched / "latest.pt", weights_only=True)["bf16_autocast"] is True
    assert "fp32 from step 0, bf16 autocast from step 20" in (switched / "model" / "MODEL_CARD.md").read_text()


def test_resume_changes_that_cannot_be_honoured_are_refused(tmp_path, monkeypatch, data_dir, finished_run):
    run = fresh_run_dir(tmp_path / "run", finished_run)
    killed_at_step_23(monkeypatch, tiny_train_config(data_dir), run, native_bf16=False)  # in epoch 2 of 2
    before = (run / "config.json").read_bytes()
    with pytest.raises(ConfigError, match="already trained 1 and a part epochs: epochs=1"):
        train(None, run, resume=True, changes=["epochs=1"])
    bounded = shutil.copytree(run, tmp_path / "bounded")
    data = json.loads(before)
    (bounded / "config.json").write_text(json.dumps({**data, "max_steps": 30}))
    with pytest.raises(ConfigError, match="max_steps=30, not after a number of epochs"):
        train(None, bounded, resume=True, changes=["epochs=5"])
    (run / "latest.pt").unlink()
    with pytest.raises(ConfigError, match="no training state"):
        train(None, run, resume=True, changes=["epochs=3"])
    assert (run / "config.json").read_bytes() == before


# --- cooldown: a linear decay of the learning rate to zero over the last epochs ------------------------------------
def test_cooldown_factor_falls_linearly_over_the_last_epochs():
    cfg = TrainConfig(epochs=5, cooldown_epochs=2)
    factors = [loop.cooldown_factor(e, b, 4, cfg) for e in range(5) for b in range(4)]
    assert factors[:12] == [1.0] * 12  # epochs 1-3: the schedule as it is
    assert factors[12:] == pytest.approx([1 - k / 8 for k in range(8)])  # then 1, 7/8, ..., 1/8: zero after the end
    uneven = [loop.cooldown_factor(3, b, 2, cfg) for b in range(2)] + [loop.cooldown_factor(4, b, 6, cfg)
                                                                       for b in range(6)]
    assert uneven == pytest.approx([1, 0.75] + [0.5 - k / 12 for k in range(6)])  # each epoch an equal share
    assert loop.cooldown_factor(4, 3, 4, TrainConfig(epochs=5)) == 1.0


def test_a_run_with_a_cooldown_logs_the_decayed_learning_rate(tmp_path, data_dir, finished_run):
    run = fresh_run_dir(tmp_path / "run", finished_run)
    cfg = tiny_train_config(data_dir, cooldown_epochs=1)
    train(cfg, run)
    lrs = {e["step"]: e["lr"] for e in read_log(run) if e["event"] == "train"}
    steps = 17  # per epoch, as in the reference run
    assert lrs[20] == pytest.approx(learning_rate(20, cfg) * (1 - 2 / steps))  # batch 2 of epoch 2 (0-based)
    assert lrs[34] == pytest.approx(learning_rate(34, cfg) / steps)  # the last step: one share above zero
    assert json.loads((run / "config.json").read_text())["cooldown_epochs"] == 1
    assert "linear cooldown to zero over the last 1 epoch" in (run / "model" / "MODEL_CARD.md").read_text()


def test_a_finished_run_resumed_with_a_cooldown_equals_a_run_started_with_it(tmp_path, monkeypatch, data_dir,
                                                                              finished_run):
    """How the shipped model's cooldown was added: 2 epochs, then `--resume RUN epochs=3 cooldown_epochs=1`, equals
    a 3-epoch run with a 1-epoch cooldown from the start, killed in its cooldown and resumed."""
    extended = shutil.copytree(finished_run, tmp_path / "extended")
    shutil.rmtree(extended / "model")
    train(None, extended, resume=True, changes=["epochs=3", "cooldown_epochs=1"])
    straight = fresh_run_dir(tmp_path / "straight", finished_run)
    kill_at_step(monkeypatch, 40)  # in epoch 3, the cooldown; latest.pt at step 36
    with pytest.raises(Killed):
        train(tiny_train_config(data_dir, epochs=3, cooldown_epochs=1), straight)
    monkeypatch.undo()
    train(None, straight, resume=True)
    assert_same_training_state(extended, straight)


def test_a_cooldown_change_the_run_has_passed_is_refused(tmp_path, monkeypatch, data_dir, finished_run):
    run = fresh_run_dir(tmp_path / "run", finished_run)
    killed_at_step_23(monkeypatch, tiny_train_config(data_dir, epochs=3, cooldown_epochs=2), run, native_bf16=False)
    before = (run / "config.json").read_bytes()
    for changes in (["epochs=4"], ["cooldown_epochs=1"], ["cooldown_epochs=0"]):  # in epoch 2: in the cooldown
        with pytest.raises(ConfigError, match="past the start of its cooldown \\(epochs 2-3\\)"):
            train(None, run, resume=True, changes=changes)
    with pytest.raises(ConfigError, match="past the start of the cooldown these settings ask for \\(epochs 1-3\\)"):
        resume_policy.check_cooldown_change(tiny_train_config(data_dir, epochs=3),
                                   tiny_train_config(data_dir, epochs=3, cooldown_epochs=3), 1, False)
    resume_policy.check_cooldown_change(tiny_train_config(data_dir, epochs=3),  # at the start of the new cooldown: fine
                               tiny_train_config(data_dir, epochs=3, cooldown_epochs=2), 1, False)
    assert (run / "config.json").read_bytes() == before


def test_one_trainer_per_run_directory(tmp_path, finished_run):
    run = shutil.copytree(finished_run, tmp_path / "run")
    shutil.rmtree(run / "model")
    with resume_policy.run_lock(run):  # another trainer holds the run
        with pytest.raises(ConfigError, match=f"being trained by another process \\(pid {os.getpid()}\\)"):
            train(None, run, resume=True)
        assert not (run / "model").exists()
    train(None, run, resume=True)  # released: the run can go on
    assert (run / "model").is_dir()


def test_the_card_names_each_precision_of_a_run():
    from viz_model.modeldir.training_facts import facts_from_run

    def precision_note(events: list[dict], bf16: bool) -> str:
        cfg = TrainConfig(model=viz_model.ModelConfig(vocab_size=64), bf16=bf16)
        return facts_from_run(cfg, events).precision_note()
    start = {"event": "start", "step": 0, "device": "cpu", "precision": "fp32"}
    resume = {"event": "resume", "step": 400, "device": "cpu", "precision": "bf16 autocast"}
    assert precision_note([start], bf16=True) == ", fp32"
    assert precision_note([start, resume, {**resume, "step": 500}], True) == \
        ", fp32 from step 0, bf16 autocast from step 400"
    older = {"event": "start", "device": "cuda:0"}  # logs from before the precision was logged
    assert precision_note([older], True) == ", bf16 autocast" and precision_note([older], False) == ", fp32"
    assert precision_note([], True) == ""
    back = {**resume, "precision": "fp32"}  # the bf16 resume was killed before it saved anything
    assert precision_note([start, resume, back], True) == ", fp32"


# --- warm start (init_from): a new run from an exported model directory's weights and tokenizer ----------
@pytest.fixture(scope="module")
def fp16_source(tmp_path_factory, finished_run) -> Path:
    """The finished run's exported model saved in fp16 (as the shipped models are): the warm starts' source."""
    model, tokenizer, _ = checkpoint.load_model_dir(finished_run / "model")
    return checkpoint.save_model_dir(model, tokenizer, tmp_path_factory.mktemp("warm") / "source-fp16",
                                     dtype=torch.float16)


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory, data_dir, fp16_source) -> tuple[Path, dict]:
    """An uninterrupted run warm-started from `fp16_source`, and the weights and learning rate of its first step."""
    first: dict = {}
    real = loop.train_step

    def recording_train_step(step_fn, optimizer, batch, lr, cfg, params, autocast=None):
        if not first:
            first.update(weights=[p.detach().clone() for p in params], lr=lr)
        return real(step_fn, optimizer, batch, lr, cfg, params, autocast)

    run = tmp_path_factory.mktemp("runs") / "warm"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "train_step", recording_train_step)
        train(tiny_train_config(data_dir, init_from=str(fp16_source)), run)
    return run, first


def test_a_warm_start_begins_from_the_loaded_weights_and_tokenizer(warm_run, fp16_source, finished_run, data_dir):
    run, first = warm_run
    saved = load_file(str(fp16_source / "model.safetensors"))
    names = [name for name, _ in checkpoint.load_model_dir(fp16_source)[0].named_parameters()]
    assert len(names) == len(first["weights"]) and set(names) <= set(saved)
    for name, weight in zip(names, first["weights"]):  # step 1 starts from exactly the fp16 weights, in fp32
        assert saved[name].dtype == torch.float16 and weight.dtype == torch.float32, name
        assert torch.equal(weight, saved[name].float()), name
    cfg = tiny_train_config(data_dir, init_from=str(fp16_source))
    assert first["lr"] == learning_rate(1, cfg)  # a fresh schedule: warm-up from step 1
    assert (run / "tokenizer.model").read_bytes() == (fp16_source / "tokenizer.model").read_bytes()
    assert (run / "model" / "tokenizer.model").read_bytes() == (fp16_source / "tokenizer.model").read_bytes()
    saved_cfg = json.loads((run / "config.json").read_text())
    assert saved_cfg["init_from"] == str(fp16_source) and TrainConfig.from_dict(saved_cfg) == cfg
    assert "init_from" not in json.loads((finished_run / "config.json").read_text())  # unset: left out
    card = (run / "model" / "MODEL_CARD.md").read_text()
    assert f"warm-started from the model directory `{fp16_source}`" in card
    assert f"copied from `{fp16_source}`" in card
    warm, cold = read_log(run), read_log(finished_run)
    assert [e["step"] for e in warm if e["event"] == "val"] == [e["step"] for e in cold if e["event"] == "val"]
    first_loss = {name: next(e["loss"] for e in log if e["event"] == "train") for name, log in
                  (("warm", warm), ("cold", cold))}
    assert first_loss["warm"] < first_loss["cold"]  # it starts from a trained model, not from scratch


@pytest.mark.parametrize("scenario", ["mid-epoch", "before-first-checkpoint"])
def test_killed_and_resumed_warm_start_equals_uninterrupted(tmp_path, monkeypatch, data_dir, fp16_source, warm_run,
                                                           scenario):
    source = shutil.copytree(fp16_source, tmp_path / "source")
    run = tmp_path / "run"
    kill_at_step(monkeypatch, 23 if scenario == "mid-epoch" else 3)
    with pytest.raises(Killed):
        train(tiny_train_config(data_dir, init_from=str(source)), run)
    monkeypatch.undo()
    if scenario == "mid-epoch":
        assert torch.load(run / "latest.pt", weights_only=True)["step"] == 20
        shutil.rmtree(source)  # latest.pt holds everything: a resumed run never reads init_from again
    else:
        assert not (run / "latest.pt").exists()  # nothing saved yet: the resumed run warm-starts anew
    train(None, run, resume=True)
    assert_same_training_state(run, warm_run[0])


def test_warm_start_errors_are_raised_before_training(tmp_path, monkeypatch, data_dir, fp16_source):
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"init_from .*differs from the run's in d_ff \(64 there, 128 here\), "
                                          r"heads \(4 there, 2 here\)$"):
        train(tiny_train_config(data_dir, init_from=str(fp16_source), model={"d_ff": 128, "heads": 2}), run)
    with pytest.raises(ConfigError, match="init_from: .*nope: model directory not found"):
        train(tiny_train_config(data_dir, init_from=str(tmp_path / "nope")), run)
    broken = shutil.copytree(fp16_source, tmp_path / "broken")
    weights = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(ConfigError, match="init_from: .*model.safetensors: not a valid safetensors file"):
        train(tiny_train_config(data_dir, init_from=str(broken)), run)
    (broken / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match="init_from: .*model.safetensors: missing file"):
        train(tiny_train_config(data_dir, init_from=str(broken)), run)
    assert not run.exists()
    with pytest.raises(ConfigError, match="init_from must be the path of a model directory"):
        tiny_train_config(data_dir, init_from=3)
    monkeypatch.chdir(fp16_source.parent)  # a relative path is read from the working directory, like data_dir;
    model, tokenizer = resume_policy.load_init(tiny_train_config(data_dir, init_from=fp16_source.name,  # the vocabulary
                                                        model={"vocab_size": 999}))  # follows the tokenizer
    assert model.config.vocab_size == tokenizer.vocab_size < 999
    resume_policy.load_init(tiny_train_config(data_dir, init_from=fp16_source.name,  # a warm start may change dropout
                                     model={"dropout": 0.3, "attention_dropout": 0.2}))


# --- errors before any training starts -------------------------------------------------------------
def copy_data(data_dir: Path, target: Path) -> Path:
    return shutil.copytree(data_dir, target)


@pytest.mark.parametrize("damage, match", [
    (lambda d: shutil.rmtree(d), "data directory not found"),
    (lambda d: (d / "train.de.gz").unlink(), "no file train.de.gz or train.de"),
    (lambda d: (d / "val.en.gz").unlink(), "no file val.en.gz"),
    (lambda d: write_lines(d / "train.de.gz", [de for _, de in make_pairs(199, seed=1)]),
     "has 200 lines but .*train.de.gz has 199"),
    (lambda d: write_lines(d / "train.en.gz", []), "train.en.gz: file is empty"),
    (lambda d: (d / "train.en.gz").write_bytes(b"not gzip at all"), "train.en.gz: unreadable"),
    (lambda d: (d / "train.de.gz").write_bytes(gzip.compress("Ein Mann\n".encode("utf-16"))), "unreadable"),
])
def test_data_errors_are_raised_before_training(tmp_path, data_dir, damage, match):
    data = copy_data(data_dir, tmp_path / "data")
    damage(data)
    run = tmp_path / "run"
    with pytest.raises(DataError, match=match):
        train(tiny_train_config(data), run)
    assert not (run / "latest.pt").exists() and not (run / "tokenizer.model").exists()


def test_plain_text_data_files_work_too(tmp_path):
    write_split(tmp_path, "train", make_pairs(5, seed=4), suffix="")
    src, tgt = read_parallel(tmp_path, "train", "en", "de")
    assert len(src) == len(tgt) == 5
    assert open_text(tmp_path / "train.en") == src


def test_config_errors_are_raised_before_training(tmp_path, data_dir):
    toml = tmp_path / "bad.toml"
    write_toml(toml, tiny_train_config(data_dir))
    text = toml.read_text()
    toml.write_text(text.replace("warmup_steps", "warmup_step"))
    with pytest.raises(ConfigError, match="did you mean 'warmup_steps'"):
        TrainConfig.from_toml(toml)
    toml.write_text(text)
    with pytest.raises(ConfigError, match="divisible"):
        TrainConfig.from_toml(toml, ["model.heads=5"])
    with pytest.raises(ConfigError, match="nothing to resume"):
        train(None, tmp_path / "empty-run", resume=True)


def test_a_run_directory_from_another_config_is_refused(tmp_path, finished_run, data_dir):
    run = shutil.copytree(finished_run, tmp_path / "run")
    before = (run / "latest.pt").read_bytes()
    with pytest.raises(ConfigError, match=r"another config \(differs in epochs, model.d_model\)"):
        train(tiny_train_config(data_dir, epochs=3, model={"d_model": 16}), run)
    with pytest.raises(ConfigError, match="already holds a started run"):
        train(tiny_train_config(data_dir), run)
    with pytest.raises(ConfigError, match=r"was started with another config \(differs in epochs\)"):
        train(tiny_train_config(data_dir, epochs=3), run, resume=True)
    assert (run / "latest.pt").read_bytes() == before


def test_corrupt_training_state_is_a_clear_error(tmp_path, finished_run):
    run = shutil.copytree(finished_run, tmp_path / "run")
    (run / "latest.pt").write_bytes((run / "latest.pt").read_bytes()[:1000])
    with pytest.raises(ConfigError, match="latest.pt: unreadable training state"):
        train(None, run, resume=True)
    (run / "config.json").write_text("{")
    with pytest.raises(ConfigError, match="config.json: not valid JSON"):
        train(None, run, resume=True)


def test_no_pair_fits_max_len(tmp_path):
    data = tmp_path / "data"
    long = [("word " * 80, "Wort " * 80)] * 5
    write_split(data, "train", long)
    write_split(data, "val", long)
    with pytest.raises(ConfigError, match="no training pair fits max_len"):
        train(tiny_train_config(data, max_len=16), tmp_path / "run")


# --- batching --------------------------------------------------------------------------------------
def test_batches_are_deterministic_complete_and_bounded(tokenizer, corpus):
    data = encode_pairs(tokenizer, [en for en, _ in corpus], [de for _, de in corpus], max_len=64)
    a, b = make_batches(data, 200, seed=1, epoch=0), make_batches(data, 200, seed=1, epoch=0)
    assert a == b
    assert make_batches(data, 200, seed=1, epoch=1) != a  # a new order every epoch
    assert sorted(i for batch in a for i in batch) == list(range(len(data)))
    for batch in a:
        longest = max(max(len(data.src[i]), len(data.tgt[i]) + 1) for i in batch)
        assert longest * len(batch) <= 200 or len(batch) == 1
    collated = collate(data, a[0])
    assert collated.src.shape[0] == collated.tgt_in.shape[0] == len(a[0])
    assert (collated.tgt_in[:, 0] == 2).all()
    assert collated.target_tokens == sum(len(data.tgt[i]) + 1 for i in a[0])


def test_encode_pairs_drops_empty_and_too_long_pairs(tokenizer):
    data = encode_pairs(tokenizer, ["A man.", "", "word " * 50, "A dog."], ["Ein Mann.", "Leer", "Wort", ""],
                        max_len=20)
    assert isinstance(data, EncodedPairs) and len(data) == 1
    assert data.src[0][-1] == 3 and data.tgt[0] == tokenizer.encode("Ein Mann.")


# --- DistributedDataParallel on CPU (gloo), 2 processes --------------------------------------------
RANK_AUDIT = r'''
import json, os, runpy, sys
run_dir, report = os.path.realpath(sys.argv[1]), sys.argv[2]
writes = []
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def inside(path):
    try:
        return os.path.realpath(os.fsdecode(path)).startswith(run_dir)
    except (TypeError, ValueError):
        return False

def hook(event, args):
    if event == "open" and isinstance(args[2], int) and args[2] & WRITE and inside(args[0]):
        writes.append(["open", os.fsdecode(args[0])])
    elif event in ("os.rename", "os.remove", "os.mkdir", "os.rmdir", "os.chmod", "shutil.copyfile"):
        target = args[1] if event in ("os.rename", "shutil.copyfile") else args[0]
        if inside(target):
            writes.append([event, os.fsdecode(target)])

sys.addaudithook(hook)

import hashlib
import viz_model.train.loop as loop
digests = []  # after every optimizer step: SHA-256 of all of this process's parameters
original_step = loop.train_step

def audited_step(step_fn, optimizer, *args, **kwargs):
    out = original_step(step_fn, optimizer, *args, **kwargs)
    digest = hashlib.sha256()
    for group in optimizer.param_groups:
        for p in group["params"]:
            digest.update(p.detach().float().cpu().numpy().tobytes())
    digests.append(digest.hexdigest())
    return out

loop.train_step = audited_step
sys.argv = ["viz_model.train", *sys.argv[3:]]
code = 1
try:
    runpy.run_module("viz_model.train", run_name="__main__")
except SystemExit as exit:
    code = exit.code
finally:
    with open(f"{report}.{os.environ['RANK']}.json", "w") as f:
        json.dump({"rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]), "code": code,
                   "writes": writes, "digests": digests}, f)
'''


@pytest.mark.slow
def test_ddp_two_cpu_processes_with_gloo(tmp_path, data_dir, finished_run):
    run = fresh_run_dir(tmp_path / "run", finished_run)
    config = tmp_path / "tiny.toml"
    write_toml(config, tiny_train_config(data_dir, epochs=1, test_prefixes=()))
    script = tmp_path / "audited_train.py"
    script.write_text(RANK_AUDIT)
    report = tmp_path / "report"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             str(script), str(run), str(report), "--config", str(config), "--run-dir", str(run)],
                            env=env, capture_output=True, text=True, timeout=170)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = {r: json.loads(Path(f"{report}.{r}.json").read_text()) for r in (0, 1)}
    assert all(ranks[r]["code"] == 0 and ranks[r]["world"] == 2 for r in (0, 1))
    assert ranks[1]["writes"] == []  # only rank 0 writes
    written = {Path(p).name for _, p in ranks[0]["writes"]}
    assert {"log.jsonl", "config.json", "model.safetensors"} <= written  # (so the audit does see writes)

    events = read_log(run)
    assert [e["event"] for e in events].count("start") == 1 and events[0]["world"] == 2
    single = read_log(finished_run)
    # each rank trains on its own half of the batches: half the steps of a single-process epoch
    steps_single = next(e["step"] for e in single if e["event"] == "val")
    steps_ddp = next(e["step"] for e in events if e["event"] == "val")
    assert steps_ddp == steps_single // 2
    state = torch.load(run / "latest.pt", weights_only=True)
    assert (state["step"], state["world"]) == (steps_ddp, 2)
    # the two processes hold the same weights after every step (gradients averaged, same update), and they moved
    assert len(ranks[0]["digests"]) == steps_ddp and ranks[0]["digests"] == ranks[1]["digests"]
    assert len(set(ranks[0]["digests"])) == steps_ddp
    model = viz_model.load(run / "model", device="cpu")
    assert isinstance(model.translate("A man is running."), str)
