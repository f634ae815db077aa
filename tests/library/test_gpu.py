"""On a CUDA GPU the library computes what it computes on the CPU: the shipped model's translations, every map and
the attributions; training under bf16 autocast; the explorer serving from the GPU; a GPU that runs out of memory.

Every test here is marked `gpu` and skips where torch sees no CUDA device (tests/conftest.py). The CPU side of each
comparison runs in full precision (`search="fp32"`): the int8 search exists on the CPU only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from support.data import tiny_train_config

import viz_model
from viz_model.attribution import attribute
from viz_model.train.loop import train

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
SENTENCES = ["Two dogs are playing in the snow.", "A man in a red jacket is riding a bicycle down the street.",
             "Several children sit on the steps of an old building.", "A woman reads.",
             "The girl with the long hair throws a ball to her brother on the beach.",
             "People are waiting for the train at a crowded station.", "A cook is preparing food in a kitchen."]
MAP_TOLERANCE = 1e-5
ATTRIBUTION_RTOL = 1e-4


@pytest.fixture(scope="module")
def on_both() -> tuple[viz_model.TranslationModel, viz_model.TranslationModel]:
    """The shipped model on the CPU and on the GPU, both searching in full precision."""
    return viz_model.load(device="cpu", precision="fp32"), viz_model.load(device="cuda", precision="fp32")


@pytest.mark.parametrize("beam", [1, 4])
def test_the_shipped_model_translates_and_attends_on_the_gpu_as_on_the_cpu(on_both, beam):
    cpu, gpu = on_both
    assert gpu.device.type == "cuda" and next(gpu.network.parameters()).is_cuda
    for text in SENTENCES:
        a, b = cpu.trace(text, beam=beam), gpu.trace(text, beam=beam)
        assert b.device.startswith("GPU") and a.device == "CPU", (a.device, b.device)
        assert b.output_ids == a.output_ids and b.translation == a.translation, text
        for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
            for layer, (x, y) in enumerate(zip(getattr(a, kind), getattr(b, kind), strict=True)):
                assert x.shape == y.shape
                gap = float(np.abs(x - y).max())
                assert gap <= MAP_TOLERANCE, f"{text!r}: {kind}[{layer}] differs by {gap:.2e}"
        assert b.log_probability == pytest.approx(a.log_probability, abs=1e-4)
    assert gpu.translate(SENTENCES, beam=beam) == cpu.translate(SENTENCES, beam=beam)


def test_attributions_on_the_gpu_equal_the_cpus(on_both):
    cpu, gpu = on_both
    methods = ["attention", "rollout", "value_weighted", "alti", "saliency", "input_x_gradient",
               "integrated_gradients"]
    for text in SENTENCES[:3]:
        a = attribute(cpu, text, methods=methods, beam=1, steps=32, tolerance=0.0)
        b = attribute(gpu, text, methods=methods, beam=1, steps=32, tolerance=0.0)
        assert b.output_ids == a.output_ids
        assert a.alti is not None and b.alti is not None and a.encoder_alti is not None
        pairs = [("log_probs", a.log_probs, b.log_probs), ("alti", a.alti, b.alti),
                 ("encoder_alti", a.encoder_alti, b.encoder_alti),
                 *((f"gradients.{m}", a.gradients[m], b.gradients[m]) for m in a.gradients)]
        layered = {"attentions": (a.attentions, b.attentions),
                   "encoder_attentions": (a.encoder_attentions, b.encoder_attentions),
                   **{f"value_weighted.{k}": (a.value_weighted[k], b.value_weighted[k]) for k in a.value_weighted},
                   **{f"alti_layers.{k}": (a.alti_layers[k], b.alti_layers[k]) for k in a.alti_layers}}
        pairs += [(f"{name}[{i}]", x, y) for name, (xs, ys) in layered.items()
                  for i, (x, y) in enumerate(zip(xs, ys, strict=True))]
        assert {"saliency", "input_x_gradient", "integrated_gradients"} <= set(a.gradients) and a.value_weighted
        for name, x, y in pairs:
            scale = float(np.abs(x).max()) or 1.0
            gap = float(np.abs(x - y).max()) / scale
            assert gap <= ATTRIBUTION_RTOL, f"{text!r}: {name} differs by {gap:.2e} of its largest value"


def test_a_training_run_on_the_gpu_under_bf16_autocast_trains_and_resumes(tmp_path, data_dir, monkeypatch):
    from viz_model.nn.model import Transformer

    seen, encode = set(), Transformer.encode

    def watched(self, *args, **kwargs):  # how each training step's forward pass runs
        if self.training:
            seen.add((next(self.parameters()).device.type, torch.is_autocast_enabled("cuda"),
                      torch.get_autocast_dtype("cuda")))
        return encode(self, *args, **kwargs)

    monkeypatch.setattr(Transformer, "encode", watched)
    cfg = tiny_train_config(data_dir, device="cuda", bf16=True, epochs=3, max_steps=0)
    run = tmp_path / "run"
    exported = train(cfg, run)
    assert seen == {("cuda", True, torch.bfloat16)}, seen
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    start = next(e for e in log if e["event"] == "start")
    assert start["device"].startswith("cuda") and start["precision"] == "bf16 autocast", start
    losses = [e["loss"] for e in log if e["event"] == "train"]
    assert len(losses) >= 2 and all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    model = viz_model.load(exported, device="cpu")  # trained on the GPU, served anywhere: fp32 weights on disk
    assert next(model.network.parameters()).dtype == torch.float32
    assert model.translate("A man is running.")
    train(None, run, resume=True, changes=["epochs=4"])
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    resumed = [e for e in log if e["event"] == "resume"]
    assert len(resumed) == 1 and resumed[0]["precision"] == "bf16 autocast"
    assert [e["epoch"] for e in log if e["event"] == "train"][-1] == 4


def test_running_out_of_gpu_memory_raises_and_the_next_request_runs(on_both):
    _, gpu = on_both
    expected = gpu.trace(SENTENCES[1], beam=4)
    torch.cuda.set_per_process_memory_fraction(1e-6)
    try:
        torch.cuda.empty_cache()
        with pytest.raises(torch.cuda.OutOfMemoryError):
            gpu.trace(SENTENCES[1] + " Again.", beam=4)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
    again = gpu.trace(SENTENCES[1], beam=4)
    assert again.output_ids == expected.output_ids
    for x, y in zip(again.cross_attentions, expected.cross_attentions, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-6)


APP_ON_THE_GPU = textwrap.dedent("""
    import json, sys
    import torch
    from streamlit.testing.v1 import AppTest
    sentence, app = sys.argv[1], sys.argv[2]
    at = AppTest.from_file(app, default_timeout=300)
    at.query_params.update({"beam": "1", "sentence": sentence})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    first = json.loads(at.get("plotly_chart")[0].proto.spec)
    shown = " ".join(m.value for m in at.markdown)
    badge = "\\n".join(m.value for m in at.sidebar.markdown)
    # another session asks for a new sentence while the GPU has (almost) no memory left, then once more
    at = AppTest.from_file(app, default_timeout=300)
    at.query_params.update({"beam": "4", "sentence": sentence + " Once more."})
    torch.cuda.set_per_process_memory_fraction(1e-6)
    torch.cuda.empty_cache()
    at.run()
    oom = " ".join(e.value for e in at.error)
    torch.cuda.set_per_process_memory_fraction(1.0)
    torch.cuda.empty_cache()
    at.run()
    print(json.dumps({"first": first, "badge": badge, "shown": shown, "oom": oom, "charts": len(at.get("plotly_chart")),
                      "errors": [e.value for e in at.error]}))
""")


def test_the_explorer_serves_from_the_gpu(tmp_path, on_both):
    """The app with VIZ_MODEL_DEVICE=cuda (what `viz-model app --device cuda` sets), in its own process: the GPU
    badge, the first heatmap equal to the CPU trace's, and a request that runs out of GPU memory said in one message,
    after which the same session draws again."""
    pytest.importorskip("streamlit")
    from support.app import arr

    cpu, _ = on_both
    sentence = SENTENCES[0]
    script = tmp_path / "app_on_gpu.py"
    script.write_text(APP_ON_THE_GPU)
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "VIZ_MODEL_DEVICE": "cuda", "PYTHONPATH": path}
    done = subprocess.run([sys.executable, str(script), sentence, str(ROOT / "app" / "streamlit_app.py")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "GPU" in result["badge"], result["badge"]
    assert result["first"]["layout"]["title"]["text"] == "Encoder self-attention: layer 1, head 1"
    shown = arr(result["first"]["data"][0]["z"])
    on_cpu = cpu.trace(sentence, beam=1)
    expected = on_cpu.encoder_attentions[0][0]
    assert shown.size == expected.size
    assert float(np.abs(shown.reshape(expected.shape) - expected).max()) <= MAP_TOLERANCE
    # decoded on the GPU as on the CPU (greedy, full precision on both; the page escapes Markdown)
    assert on_cpu.translation in result["shown"].replace("\\", "")
    assert "The GPU ran out of memory" in result["oom"]
    assert result["charts"] >= 1 and not result["errors"], result["errors"]
