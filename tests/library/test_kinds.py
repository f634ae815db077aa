"""Every kind of model implements one interface (`viz_model.kinds.base.ModelKind`), and shared library code reaches a
model through it: no module of analysis/, attribution/, plot/, lessons/ or cli/ asks which class or kind it holds.
The interface is exercised on the briefly trained tiny translator and on the shipped language model; CPU, fp32."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

import viz_model
from viz_model.analysis import head_mask_for
from viz_model.kinds.base import ModelKind, PerKind
from viz_model.kinds.language_model import LanguageModel
from viz_model.kinds.translator import TranslationModel

REPO = Path(__file__).resolve().parents[2]
SHARED = ("analysis", "attribution", "plot", "lessons", "cli")  # viz_model/'s folders that never ask for a kind
MODEL_CLASSES = {"ModelKind", "TranslationModel", "LanguageModel"}
KIND_NAMES = {TranslationModel.kind, LanguageModel.kind}


def class_names(node: ast.expr) -> set[str]:
    """The names a class argument of isinstance / issubclass names (a tuple: each; ``a.B``: B)."""
    if isinstance(node, ast.Tuple):
        return set().union(*(class_names(element) for element in node.elts))
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.BinOp):  # A | B
        return class_names(node.left) | class_names(node.right)
    return set()


def asks_for_a_kind(node: ast.AST) -> bool:
    """Whether `node` asks which kind of model a value is: ``isinstance`` / ``issubclass`` on a model class,
    ``type(x) is`` / ``==`` a model class, or a ``.kind`` compared with a kind's name."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") and \
            len(node.args) == 2 and bool(class_names(node.args[1]) & MODEL_CLASSES)
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    typed = any(isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id == "type"
                for side in sides)
    if typed and any(class_names(side) & MODEL_CLASSES for side in sides):
        return True
    return any(isinstance(side, ast.Attribute) and side.attr == "kind" for side in sides) and \
        any(isinstance(side, ast.Constant) and side.value in KIND_NAMES for side in sides)


def kind_checks(source: str) -> list[int]:
    """The lines of `source` that ask which kind of model a value is (`asks_for_a_kind`), in order."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source)) if asks_for_a_kind(node))


def test_the_check_finds_each_way_of_asking_for_a_kind():
    """The scan below would pass vacuously if it missed these: the checks shared code had before the interface."""
    asked = ("if isinstance(model, LanguageModel):\n    pass\n"
             "piece = model.tokenizer.piece if isinstance(model, api.TranslationModel) else model\n"
             "x = isinstance(model, (int, LanguageModel))\n"
             "y = type(model) is TranslationModel\n"
             "z = model.kind == 'language_model'\n"
             "w = 'translator' != model.kind\n")
    assert kind_checks(asked) == [1, 3, 4, 5, 6, 7]
    fine = ("ok = isinstance(model, str)\nkinds = 'cross' in model.attention_kinds\nc = config.kind == 'decoder'\n"
            "piece = model if callable(model) else model.tokenizer.piece\n")
    assert kind_checks(fine) == []


def test_shared_library_code_never_asks_which_kind_of_model_it_holds():
    offenders = [f"{path.relative_to(REPO)}:{line}" for folder in SHARED
                 for path in sorted((REPO / "viz_model" / folder).rglob("*.py"))
                 for line in kind_checks(path.read_text(encoding="utf-8"))]
    assert not offenders, "reach the model through viz_model.kinds.base.ModelKind or a PerKind table:\n" + \
        "\n".join(offenders)


@pytest.fixture(scope="module")
def shipped_lm() -> LanguageModel:
    return viz_model.load("multi30k-lm-en", device="cpu")


@pytest.fixture(params=["translator", "language_model"])
def model(request, tiny_model, shipped_lm) -> ModelKind:
    return {"translator": tiny_model, "language_model": shipped_lm}[request.param]


def test_both_kinds_are_the_interface_and_say_which_they_are(tiny_model, shipped_lm):
    assert isinstance(tiny_model, ModelKind) and isinstance(shipped_lm, ModelKind)
    assert (tiny_model.kind, shipped_lm.kind) == ("translator", "language_model")
    assert tiny_model.attention_kinds == ("encoder", "decoder", "cross")
    assert shipped_lm.attention_kinds == ("decoder",)
    assert shipped_lm.description == "a language model (decoder-only)"
    for kind in (TranslationModel, LanguageModel):
        assert not inspect.isabstract(kind), f"{kind.__name__} leaves {sorted(kind.__abstractmethods__)} undone"
    assert {"encode", "trace", "sequence_log_probs", "embeddings"} <= ModelKind.__abstractmethods__


def test_layers_and_heads_per_attention_kind(model):
    config = model.config
    for kind in model.attention_kinds:
        assert model.num_layers(kind) == (config.encoder_layers if kind == "encoder" else config.decoder_layers) > 0
    assert model.num_heads == config.heads > 0
    missing = [kind for kind in ("encoder", "decoder", "cross") if kind not in model.attention_kinds]
    for kind in missing:
        with pytest.raises(ValueError, match=f"has no {kind} attention"):
            model.num_layers(kind)


def test_tokens_trace_and_the_hooks_of_the_analyses(model):
    """encode / pieces, a trace, a forced pass with a head off (the trace's forced_ids and head_mask), the
    log-probabilities of given outputs with and without that head, and the embeddings gradients are taken against."""
    text = "Two dogs play in the snow."
    ids = model.encode(text)
    assert ids and all(isinstance(i, int) for i in ids)
    assert model.pieces(ids) == model.tokenizer.pieces(ids) and len(model.pieces(ids)) == len(ids)
    trace = model.trace(text, top_k=2)
    prompt = trace.settings.get("prompt_length")  # a language model's output follows its prompt in target_ids
    forced = trace.output_ids if prompt is None else trace.target_ids[prompt:]
    assert forced
    again = model.trace(text, top_k=2, forced_ids=forced)
    np.testing.assert_allclose(again.log_probability, trace.log_probability, atol=1e-4)
    last = model.attention_kinds[-1]  # cross for a translator, decoder for a language model
    mask = head_mask_for(model.config, [(last, 0, 0)], model.device)
    ablated = model.trace(text, top_k=2, forced_ids=forced, head_mask=mask)
    assert ablated.log_probability != pytest.approx(trace.log_probability, abs=1e-6)
    inputs = [trace.source_ids or ids]  # a translator's source (with its end), a language model's prompt
    outputs = [forced]
    intact, off = model.sequence_log_probs(inputs, outputs), model.sequence_log_probs(inputs, outputs, mask)
    assert intact.shape == off.shape == (1,) and np.isfinite(intact).all() and intact[0] != off[0]
    np.testing.assert_allclose(intact[0], trace.log_probability, atol=1e-3)
    embedded = model.embeddings(inputs[0])
    assert isinstance(embedded, torch.Tensor) and embedded.shape == (1, len(inputs[0]), model.config.d_model)


def test_a_per_kind_table_runs_the_kind_s_function_and_refuses_another(tiny_model, shipped_lm):
    table: PerKind = PerKind("an analysis")
    table.register("translator")(lambda model, x: ("translated", model.name, x))
    assert table.of(tiny_model)(tiny_model, 3) == ("translated", tiny_model.name, 3)
    with pytest.raises(ValueError, match=r"^an analysis does not apply to a language model \(decoder-only\)$"):
        table.of(shipped_lm)
