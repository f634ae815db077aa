"""An imported language model reads its weights where they are (issue 51): the model directory holds config,
tokenizer and ``weight_source.json`` naming the source folder's safetensors files (a sharded index followed), the
tensors are memory-mapped, not copied. Small random Llama models built by transformers; CPU, fp32 (a bf16 folder is
upcast to fp32 on the CPU). A changed or missing source file is refused in one line; a hub id's directory points
into the hub's own cache; loading a ~180 MB model holds about one copy of its weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf_lm import build_lm_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.hf.hub_cache import CACHE_ENV  # noqa: E402
from viz_model.hf.importer import HFImportError, import_model  # noqa: E402
from viz_model.modeldir.checkpoint import CheckpointError  # noqa: E402
from viz_model.modeldir.weight_source import WEIGHT_SOURCE  # noqa: E402

PROMPTS = ["The red dog reads a book in the park.", "An old man runs in the snow, and the cat sleeps."]


def sharded_folder(root: Path, dtype: torch.dtype = torch.float32) -> Path:
    """A small random Llama folder saved in shards of about 30 kB (`dtype`), with its index."""
    folder = build_lm_folder(root, "llama")
    model = transformers.LlamaForCausalLM.from_pretrained(folder).to(dtype)
    (folder / "model.safetensors").unlink()
    model.save_pretrained(folder, max_shard_size="30KB")
    assert (folder / "model.safetensors.index.json").is_file()
    return folder


def shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("model-*.safetensors"))


def tree_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def assert_equal_to_transformers(lm, folder: Path, dtype: torch.dtype = torch.float32) -> None:
    """Every map within 1e-5 and the logits within 1e-4 of transformers' eager fp32 model of `folder`."""
    theirs = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                           dtype=dtype).float().eval()
    for prompt in PROMPTS:
        ids = torch.tensor([lm.tokenizer.encode(prompt)])
        with torch.no_grad():
            expected = theirs(ids, output_attentions=True)
            got = lm.network(ids, need_weights=True)
        for a, b in zip(got.attentions, expected.attentions, strict=True):
            assert (a - b).abs().max() <= 1e-5
        assert (got.logits - expected.logits).abs().max() <= 1e-4


def mapped_files() -> set[str]:
    """The files this process maps into memory (Linux)."""
    return {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "/" in line}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return sharded_folder(tmp_path_factory.mktemp("hf"))


def test_a_sharded_folder_imports_without_copying_its_weights(folder, tmp_path):
    out = tmp_path / "lm"
    assert main(["import", str(folder), "--out", str(out)]) == 0
    assert not [p.name for p in out.iterdir() if p.suffix in (".safetensors", ".bin")]
    record = json.loads((out / WEIGHT_SOURCE).read_text())
    assert Path(record["folder"]) == folder.resolve() and record["model_type"] == "llama"
    assert [f["name"] for f in record["files"]] == [p.name for p in shards(folder)] and len(record["files"]) > 2
    weights = sum(p.stat().st_size for p in shards(folder))
    assert tree_bytes(out) < weights / 4, (tree_bytes(out), weights)
    lm = viz_model.load(out, device="cpu")
    assert isinstance(lm, viz_model.LanguageModel) and lm.network.embedding.weight.dtype == torch.float32
    assert_equal_to_transformers(lm, folder)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads Linux's /proc/self/maps")
def test_the_weights_are_mapped_from_the_source_files_not_copied(folder, tmp_path):
    lm = viz_model.load(import_model(str(folder), tmp_path / "lm"), device="cpu")
    assert {str(p.resolve()) for p in shards(folder)} <= mapped_files()
    copy = viz_model.load(import_model(str(folder), tmp_path / "copy", copy=True), device="cpu")
    assert (copy.directory / "model.safetensors").is_file() and not (copy.directory / WEIGHT_SOURCE).exists()
    ids = torch.tensor([lm.tokenizer.encode(PROMPTS[0])])
    assert torch.equal(lm.network(ids).logits, copy.network(ids).logits)


def test_a_changed_or_missing_source_file_is_refused_in_one_line(folder, tmp_path):
    own = tmp_path / "hf"
    shutil.copytree(folder, own)
    out = import_model(str(own), tmp_path / "lm")
    shard = shards(own)[1]
    stat = shard.stat()
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(CheckpointError, match="changed since the import") as err:
        viz_model.load(out, device="cpu")
    assert "\n" not in str(err.value) and str(shard) in str(err.value)
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    viz_model.load(out, device="cpu")  # as it was: loads again
    record = json.loads((out / WEIGHT_SOURCE).read_text())
    (out / WEIGHT_SOURCE).write_text(json.dumps({**record, "folder": "../hf"}))  # a relative folder: from `out`
    viz_model.load(out, device="cpu")
    shard.rename(shard.with_suffix(".moved"))
    with pytest.raises(CheckpointError, match="missing; this model directory reads its weights there") as err:
        viz_model.load(out, device="cpu")
    assert "\n" not in str(err.value)


def test_a_bf16_folder_is_computed_in_fp32_on_the_cpu(tmp_path):
    folder = sharded_folder(tmp_path / "hf", torch.bfloat16)
    lm = viz_model.load(import_model(str(folder), tmp_path / "lm"), device="cpu")
    assert {p.dtype for p in lm.network.parameters()} == {torch.float32}
    assert_equal_to_transformers(lm, folder, torch.bfloat16)  # the same bf16 values, upcast on both sides


def test_a_stored_precision_without_a_copy_is_refused_in_one_line(folder, tmp_path):
    with pytest.raises(HFImportError, match="^dtype='fp16' stores a copy") as err:
        import_model(str(folder), tmp_path / "lm", dtype="fp16")
    assert "\n" not in str(err.value) and not (tmp_path / "lm").exists()
    copy = viz_model.load(import_model(str(folder), tmp_path / "lm16", dtype="fp16", copy=True), device="cpu")
    assert copy.network.embedding.weight.dtype == torch.float32


def test_a_hub_id_reads_the_hubs_own_cache_and_is_imported_again_when_its_files_go(folder, tmp_path, monkeypatch):
    import huggingface_hub

    blobs, snapshot = tmp_path / "hub" / "blobs", tmp_path / "hub" / "snapshots" / "abc123"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for i, file in enumerate(sorted(folder.iterdir())):  # the hub's layout: the snapshot's files link to blobs
        shutil.copy(file, blobs / f"blob{i}")
        (snapshot / file.name).symlink_to(blobs / f"blob{i}")
    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **_: calls.append(repo_id) or
                        str(snapshot))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    lm = viz_model.load("owner/tiny-llama", device="cpu")
    assert calls == ["owner/tiny-llama"] and lm.directory == tmp_path / "cache" / "owner--tiny-llama"
    assert Path(json.loads((lm.directory / WEIGHT_SOURCE).read_text())["folder"]) == snapshot.resolve()
    assert tree_bytes(lm.directory) < sum(p.stat().st_size for p in shards(folder)) / 4
    viz_model.load("owner/tiny-llama", device="cpu")
    assert len(calls) == 1  # reused
    first = shards(snapshot)[0]
    first.resolve().unlink()  # the hub's cache lost a blob: downloaded and imported again
    shutil.copy(shards(folder)[0], first.resolve())
    again = viz_model.load("owner/tiny-llama", device="cpu")
    assert len(calls) == 2
    assert_equal_to_transformers(again, folder)


PEAK = """
import sys, torch, viz_model
def status(key):  # kB; VmHWM: this process's peak resident memory (ru_maxrss would carry its parent's over exec)
    return next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith(key + ':'))
before = status('VmRSS')
lm = viz_model.load(sys.argv[1], device='cpu')
with torch.inference_mode():
    lm.network(torch.tensor([[5, 6, 7, 8]]))  # every weight read once
print((status('VmHWM') - before) * 1024)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads Linux's /proc/self/status")
def test_loading_a_180_mb_model_holds_about_one_copy_of_its_weights(folder, tmp_path):
    """Peak resident memory of a fresh process loading the model and running one forward, above what it held
    before loading: within 1.4 copies of the fp32 weights (a second copy would be 2)."""
    from safetensors.torch import save_file

    big = tmp_path / "big"
    shutil.copytree(folder, big, ignore=shutil.ignore_patterns("*.safetensors", "*.index.json"))
    config = transformers.LlamaConfig.from_pretrained(folder)
    config.update({"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4, "num_attention_heads": 16,
                   "num_key_value_heads": 4, "head_dim": 64})
    config.save_pretrained(big)
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in transformers.LlamaForCausalLM(config).state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    tensors = {k: torch.randn(s, generator=generator) * 0.02 for k, s in shapes.items()}
    save_file(tensors, str(big / "model.safetensors"))
    del tensors
    weights = (big / "model.safetensors").stat().st_size
    assert weights > 170e6
    out = import_model(str(big), tmp_path / "lm")
    script = textwrap.dedent(PEAK)
    env = {**os.environ, "PYTHONPATH": str(Path(viz_model.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    grown = int(done.stdout.split()[-1])
    assert grown < 1.4 * weights, (grown, weights)
