"""The `viz-model` command: every subcommand, and a one-line error with status 2 for every user error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
import torch
from support.cli import assert_user_error, run
from support.data import make_pairs, tiny_train_config, write_lines

import viz_model
from viz_model.cli.main import main
from viz_model.data.bleu import corpus_scores
from viz_model.on_demand import OnDemandMaps
from viz_model.trace import AttentionTrace

REPO = Path(__file__).resolve().parents[2]
TEXT = "Two dogs are playing in the snow."


# --- translate / trace / info ----------------------------------------------------------------------
def test_translate(capsys, model_dir, tiny_model):
    code, out, _ = run(capsys, "translate", TEXT, "--model", model_dir, "--beam", "2", "--alpha", "0.8",
                       "--device", "cpu")
    assert code == 0
    assert out == tiny_model.translate(TEXT, beam=2, alpha=0.8) + "\n"


def test_trace_to_json_npz_and_stdout(capsys, tmp_path, model_dir, tiny_model):
    expected = tiny_model.trace(TEXT, beam=3)
    for name in ("t.json", "t.npz"):
        code, out, err = run(capsys, "trace", TEXT, "--out", tmp_path / name, "--model", model_dir, "--beam", "3",
                             "--device", "cpu")
        assert code == 0 and out == ""
        assert "wrote" in err and expected.translation in err
        loaded = AttentionTrace.load(tmp_path / name)
        assert loaded.output_ids == expected.output_ids and loaded.settings["beam"] == 3
        assert len(loaded.encoder_attentions) == tiny_model.config.encoder_layers
    code, out, _ = run(capsys, "trace", TEXT, "--out", "-", "--model", model_dir, "--beam", "1", "--top-k", "2",
                       "--device", "cpu")
    assert code == 0
    trace = AttentionTrace.from_json(out)
    assert trace.settings["top_k"] == 2 and all(len(s.top_ids) == 2 for s in trace.steps)


def test_trace_with_maps_on_demand_saves_recipes_that_load_back_as_the_maps(capsys, tmp_path, model_dir, tiny_model):
    code, _, _ = run(capsys, "trace", TEXT, "--out", tmp_path / "t.npz", "--model", model_dir, "--maps", "on_demand",
                     "--device", "cpu")
    assert code == 0
    loaded, full = AttentionTrace.load(tmp_path / "t.npz"), tiny_model.trace(TEXT, maps="full")
    assert isinstance(loaded.cross_attentions, OnDemandMaps) and loaded.output_ids == full.output_ids
    np.testing.assert_allclose(loaded.cross_attentions[1], full.cross_attentions[1], rtol=0, atol=1e-5)


def test_trace_with_forced_target(capsys, model_dir):
    target = "Zwei Hunde spielen im Schnee."
    code, out, _ = run(capsys, "trace", TEXT, "--out", "-", "--target", target, "--model", model_dir)
    assert code == 0
    trace = AttentionTrace.from_json(out)
    assert trace.translation == target and trace.settings["forced"] is True


def test_info(capsys, model_dir, tiny_model):
    code, out, _ = run(capsys, "info", "--model", model_dir, "--device", "cpu")
    assert code == 0
    header, _, card = out.partition("\n}\n")
    info = json.loads(header + "\n}")
    assert info["config"] == tiny_model.config.to_dict()
    assert info["parameters"] == tiny_model.network.num_parameters()
    assert info["model"] == model_dir.name and info["device"] == "CPU"
    assert "# tiny-en-de" in card


# --- eval ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def eval_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("eval")
    pairs = make_pairs(5, seed=7)
    write_lines(directory / "src.en", [en for en, _ in pairs])
    write_lines(directory / "ref.de", [de for _, de in pairs])
    write_lines(directory / "src.en.gz", [en for en, _ in pairs])
    write_lines(directory / "ref.de.gz", [de for _, de in pairs])
    write_lines(directory / "short.de", [de for _, de in pairs[:4]])
    write_lines(directory / "empty.en", [])
    write_lines(directory / "nul.en", ["A man.", "A\x00dog."])
    return directory, pairs


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_eval_plain_and_gzip(capsys, model_dir, tiny_model, eval_files, suffix):
    directory, pairs = eval_files
    code, out, err = run(capsys, "eval", "--src", directory / f"src.en{suffix}", "--ref", directory / f"ref.de{suffix}",
                         "--model", model_dir, "--beam", "2", "--device", "cpu")
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    hyps = tiny_model.translate([en for en, _ in pairs], beam=2)
    assert {k: result[k] for k in ("bleu", "chrf")} == corpus_scores(hyps, [de for _, de in pairs])
    assert (result["sentences"], result["beam"], result["model"]) == (5, 2, model_dir.name)
    assert "5/5" in err  # the progress bar


def test_eval_with_two_references(capsys, model_dir, eval_files):
    directory, _ = eval_files
    code, out, _ = run(capsys, "eval", "--src", directory / "src.en", "--ref", directory / "ref.de",
                       "--ref", directory / "ref.de.gz", "--model", model_dir, "--beam", "1")
    assert code == 0 and json.loads(out)["sentences"] == 5


def test_eval_errors(capsys, model_dir, eval_files, tmp_path):
    directory, _ = eval_files
    assert_user_error(capsys, ["eval", "--src", directory / "src.en", "--ref", directory / "short.de",
                               "--model", model_dir], "short.de has 4 lines", "has 5")
    assert_user_error(capsys, ["eval", "--src", directory / "empty.en", "--ref", directory / "empty.en",
                               "--model", model_dir], "empty")
    assert_user_error(capsys, ["eval", "--src", tmp_path / "missing.en", "--ref", directory / "ref.de",
                               "--model", model_dir], "missing.en", "not found")
    assert_user_error(capsys, ["eval", "--src", directory / "nul.en", "--ref", directory / "nul.en",
                               "--model", model_dir], "line 2", "control characters")
    for option, value in (("--beam", "0"), ("--beam", "1000"), ("--alpha", "nan"), ("--alpha", "-2")):
        assert_user_error(capsys, ["eval", "--src", directory / "src.en", "--ref", directory / "ref.de",
                                   "--model", model_dir, option, value], option[2:])
    (tmp_path / "bad.gz").write_bytes(b"not gzip")
    assert_user_error(capsys, ["eval", "--src", tmp_path / "bad.gz", "--ref", directory / "ref.de",
                               "--model", model_dir], "bad.gz", "unreadable")


# --ref-tsv: a variable number of references per sentence (Tatoeba-style), one tab-separated line per sentence
TSV_SOURCES = ["A man is playing in the snow.", "Two dogs are running on the beach.",
               "The child is sitting in the park."]
TSV_REFERENCES = [["Ein Mann spielt im Schnee."],
                  ["Zwei Hunde rennen am Strand.", "Zwei Hunde laufen am Strand."],
                  ["Das Kind sitzt im Park.", "Ein Kind sitzt im Park.", "Das Kind spielt im Park."]]


@pytest.fixture
def tsv_files(tmp_path):
    write_lines(tmp_path / "src.en", TSV_SOURCES)
    write_lines(tmp_path / "refs.tsv", ["\t".join(refs) for refs in TSV_REFERENCES])
    write_lines(tmp_path / "refs.tsv.gz", ["\t".join(refs) for refs in TSV_REFERENCES])
    return tmp_path


@pytest.mark.parametrize("name", ["refs.tsv", "refs.tsv.gz"])
def test_eval_with_a_variable_number_of_references(capsys, model_dir, tiny_model, tsv_files, name):
    code, out, _ = run(capsys, "eval", "--src", tsv_files / "src.en", "--ref-tsv", tsv_files / name,
                       "--model", model_dir, "--beam", "2", "--device", "cpu")
    assert code == 0
    result = json.loads(out)
    hyps = tiny_model.translate(TSV_SOURCES, beam=2)
    # sacrebleu's form for a variable count: stream j holds every sentence's j-th reference, None where it has none
    streams = [["Ein Mann spielt im Schnee.", "Zwei Hunde rennen am Strand.", "Das Kind sitzt im Park."],
               [None, "Zwei Hunde laufen am Strand.", "Ein Kind sitzt im Park."],
               [None, None, "Das Kind spielt im Park."]]
    assert result["bleu"] == round(sacrebleu.corpus_bleu(hyps, streams).score, 2)
    assert result["chrf"] == round(sacrebleu.corpus_chrf(hyps, streams).score, 2)
    assert result["bleu"] > 0 and result["sentences"] == 3
    first_only = sacrebleu.corpus_bleu(hyps, [streams[0]]).score  # the extra references count
    assert result["bleu"] != round(first_only, 2)


def test_eval_ref_tsv_errors(capsys, model_dir, tsv_files):
    tsv = ["\t".join(refs) for refs in TSV_REFERENCES]
    write_lines(tsv_files / "short.tsv", tsv[:2])
    write_lines(tsv_files / "blank.tsv", [tsv[0], "", tsv[2]])
    write_lines(tsv_files / "stray-tab.tsv", [tsv[0], tsv[1] + "\t", tsv[2]])
    src = ["eval", "--src", tsv_files / "src.en", "--model", model_dir]
    assert_user_error(capsys, [*src, "--ref-tsv", tsv_files / "short.tsv"], "short.tsv has 2 lines", "has 3")
    assert_user_error(capsys, [*src, "--ref-tsv", tsv_files / "blank.tsv"], "blank.tsv line 2", "empty line")
    assert_user_error(capsys, [*src, "--ref-tsv", tsv_files / "stray-tab.tsv"], "stray-tab.tsv line 2",
                      "reference 3 is empty")
    assert_user_error(capsys, [*src, "--ref-tsv", tsv_files / "missing.tsv"], "missing.tsv", "not found")
    assert_user_error(capsys, [*src, "--ref-tsv", tsv_files / "refs.tsv", "--ref", tsv_files / "src.en"],
                      "--ref", "--ref-tsv", "not both")
    assert_user_error(capsys, src, "needs references", "--ref-tsv")


# --- user errors: one line, status 2 ---------------------------------------------------------------
def test_translate_and_trace_errors(capsys, model_dir, tmp_path):
    limit = str(viz_model.load(model_dir, device="cpu").config.max_positions)
    cases = [
        (["translate", "", "--model", model_dir], ["empty"]),
        (["translate", "   ", "--model", model_dir], ["empty"]),
        (["translate", "A\x00B", "--model", model_dir], ["control characters", "U+0000"]),
        (["translate", "dogs " * 200, "--model", model_dir], [limit, "max_positions"]),
        (["translate", TEXT, "--model", model_dir, "--beam", "0"], ["beam"]),
        (["translate", TEXT, "--model", model_dir, "--beam", "99"], ["beam"]),
        (["translate", TEXT, "--model", model_dir, "--alpha", "-1"], ["alpha"]),
        (["translate", TEXT, "--model", model_dir, "--alpha", "nan"], ["alpha"]),
        (["translate", TEXT, "--model", tmp_path / "nope"], ["nope", "not found"]),
        (["trace", TEXT, "--model", model_dir, "--out", tmp_path / "t.txt"], [".json or .npz"]),
        (["trace", TEXT, "--model", model_dir, "--out", tmp_path / "no" / "dir" / "t.json"], ["t.json"]),
        (["trace", TEXT, "--model", model_dir, "--out", tmp_path / "a-directory.json"], ["a-directory.json"]),
        (["trace", TEXT, "--model", model_dir, "--out", "-", "--top-k", "0"], ["top_k"]),
        (["trace", TEXT, "--model", model_dir, "--out", "-", "--target", " "], ["target is empty"]),
        (["trace", TEXT, "--model", model_dir, "--out", "-", "--maps", "lazy"],
         ["maps must be one of auto, full, on_demand, got 'lazy'"]),
        (["info", "--model", tmp_path / "nope"], ["not found"]),
    ]
    if not torch.cuda.is_available():
        cases.append((["info", "--model", model_dir, "--device", "cuda"], ["CUDA"]))
    (tmp_path / "a-directory.json").mkdir()
    for argv, fragments in cases:
        assert_user_error(capsys, argv, *fragments)
    assert not (tmp_path / "t.txt").exists()


def test_damaged_model_directory_errors_name_the_file(capsys, model_dir, tmp_path):
    broken = shutil.copytree(model_dir, tmp_path / "broken")
    (broken / "tokenizer.model").write_bytes(b"garbage")
    assert_user_error(capsys, ["info", "--model", broken], "tokenizer.model")
    shutil.copyfile(model_dir / "tokenizer.model", broken / "tokenizer.model")
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 3])
    assert_user_error(capsys, ["translate", TEXT, "--model", broken], "model.safetensors")
    (broken / "model.safetensors").unlink()
    assert_user_error(capsys, ["translate", TEXT, "--model", broken], "model.safetensors", "missing file")


def test_default_model_missing_is_a_user_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    assert_user_error(capsys, ["translate", TEXT], "no default model")


def test_argument_errors_exit_with_status_2(capsys):
    for argv in (["translate"], ["translate", TEXT, "--beam", "four"], ["no-such-command"], []):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert "error:" in capsys.readouterr().err


# --- train / export --------------------------------------------------------------------------------
def write_toml(path: Path, values: dict) -> Path:
    model = values.pop("model")
    lines = [f"{k} = {json.dumps(list(v) if isinstance(v, tuple) else v)}" for k, v in values.items()]
    lines += ["", "[model]"] + [f"{k} = {json.dumps(v)}" for k, v in model.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_train_and_export(capsys, tmp_path, data_dir, finished_run):
    config = write_toml(tmp_path / "tiny.toml", tiny_train_config(data_dir, epochs=1, test_prefixes=()).to_dict())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copyfile(finished_run / "tokenizer.model", run_dir / "tokenizer.model")  # skip tokenizer training
    code, _, err = run(capsys, "train", "--config", config, "--run-dir", run_dir, "max_steps=5",
                       "checkpoint_every_steps=2")
    assert code == 0, err
    assert "model written to" in err and (run_dir / "model" / "model.safetensors").is_file()
    saved = json.loads((run_dir / "config.json").read_text())
    assert (saved["max_steps"], saved["checkpoint_every_steps"]) == (5, 2)  # overrides are part of the saved config
    assert torch.load(run_dir / "latest.pt", weights_only=True)["step"] == 5
    # an uninterrupted run is already complete: --resume trains no more
    code, _, err = run(capsys, "train", "--resume", run_dir)
    assert code == 0 and torch.load(run_dir / "latest.pt", weights_only=True)["step"] == 5

    out = tmp_path / "exported"
    code, _, err = run(capsys, "export", finished_run, "--out", out, "--last", "1")
    assert code == 0, err
    model = viz_model.load(out, device="cpu")
    exported = dict(model.network.state_dict())
    viz_model.modeldir.checkpoint.load_weights(model.network, finished_run / "epochs" / "epoch_002.safetensors")
    for name, tensor in model.network.state_dict().items():
        assert torch.equal(tensor, exported[name]), name  # --last 1 = the last epoch's weights
    assert "final weights = the last epoch checkpoint (epoch_002.safetensors), not averaged" in (
        out / "MODEL_CARD.md").read_text()
    code, out_text, _ = run(capsys, "info", "--model", out)
    assert code == 0 and json.loads(out_text.partition("\n}\n")[0] + "\n}")["model"] == "exported"


def test_export_in_fp16_is_reproducible_to_the_byte(capsys, tmp_path, finished_run):
    """The shipped models are fp16: `--dtype fp16` writes them, and exporting the same run twice gives identical
    files (digests compared), so a model card's "Reproduce" command rebuilds the shipped bytes."""
    import hashlib

    def digests(directory: Path) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}

    outs = [tmp_path / "a" / "model", tmp_path / "b" / "model"]  # the card names the directory: same name
    for out in outs:
        code, _, err = run(capsys, "export", finished_run, "--out", out, "--last", "2", "--dtype", "fp16")
        assert code == 0, err
    assert digests(outs[0]) == digests(outs[1]) and "model.safetensors" in digests(outs[0])
    from safetensors import safe_open

    with safe_open(str(outs[0] / "model.safetensors"), framework="pt") as f:
        names = f.keys()
        assert {f.get_tensor(k).dtype for k in names} == {torch.float16}
    fp32 = tmp_path / "c"
    assert run(capsys, "export", finished_run, "--out", fp32, "--last", "2")[0] == 0
    assert digests(fp32)["model.safetensors"] != digests(outs[0])["model.safetensors"]
    from viz_model.train.export import export_run

    with pytest.raises(viz_model.ConfigError, match="--dtype must be one of fp32, fp16, bf16"):
        export_run(finished_run, tmp_path / "d", 1, dtype="int4")


def test_train_and_export_errors(capsys, tmp_path, data_dir, finished_run):
    good = tiny_train_config(data_dir).to_dict()
    typo = write_toml(tmp_path / "typo.toml", {**good, "epohcs": 2})
    assert_user_error(capsys, ["train", "--config", typo, "--run-dir", tmp_path / "r"], "epohcs", "'epochs'")
    heads = write_toml(tmp_path / "heads.toml", {**good, "model": {**good["model"], "heads": 5}})
    assert_user_error(capsys, ["train", "--config", heads, "--run-dir", tmp_path / "r"], "divisible")
    ok = write_toml(tmp_path / "ok.toml", dict(good))
    assert_user_error(capsys, ["train", "--config", ok, "--run-dir", tmp_path / "r", "model.d_model=30"],
                      "divisible")
    assert_user_error(capsys, ["train", "--config", ok, "--run-dir", tmp_path / "r", "data_dir=" + str(tmp_path)],
                      "train.en")
    assert_user_error(capsys, ["train", "--config", ok], "--run-dir")
    assert_user_error(capsys, ["train", "--config", tmp_path / "none.toml", "--run-dir", tmp_path / "r"],
                      "none.toml", "not found")
    assert_user_error(capsys, ["train", "--resume", tmp_path / "r"], "nothing to resume")
    assert_user_error(capsys, ["train", "--resume", finished_run, "--config", ok, "epochs=9"],
                      "started with another config", "epochs")
    before = (finished_run / "config.json").read_bytes()
    assert_user_error(capsys, ["train", "--resume", finished_run, "model.d_model=128"], "cannot change model.d_model",
                      "epochs")
    assert_user_error(capsys, ["train", "--resume", finished_run, "epochs=9", "lr_peak=0.1"], "cannot change lr_peak")
    assert_user_error(capsys, ["train", "--resume", finished_run, "epochs=1"], "already trained 2 epochs", "epochs=1")
    assert_user_error(capsys, ["train", "--resume", finished_run, "max_steps=3"], "already trained", "max_steps=3")
    assert_user_error(capsys, ["train", "--resume", finished_run, "epohcs=3"], "epohcs", "'epochs'")
    assert (finished_run / "config.json").read_bytes() == before  # a refused change leaves the run as it was
    assert_user_error(capsys, ["train", "--config", ok, "--run-dir", finished_run, "epochs=7"], "another config")
    assert not (tmp_path / "r").exists()
    assert_user_error(capsys, ["export", tmp_path, "--out", tmp_path / "m"], "not a run directory")
    assert_user_error(capsys, ["export", finished_run, "--out", tmp_path / "m", "--last", "-1"], "--last")
    assert_user_error(capsys, ["export", finished_run, "--out", tmp_path / "m", "--last", "0"], "--last")
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_python_dash_m_viz_model(tmp_path, model_dir):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "viz_model", "translate", TEXT, "--model", str(model_dir),
                             "--beam", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip()
    result = subprocess.run([sys.executable, "-m", "viz_model", "translate", " ", "--model", str(model_dir)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["viz-model: error: text is empty: type a sentence to translate"]
