"""The computations behind the teaching pages (Learn): plain functions, no Streamlit, unit-tested.

Every number a lesson shows comes from the code the model runs: attention from `viz_model.nn.attention`, the
sinusoids and the shift matrices from `viz_model.nn.positional`, the schedule from
`viz_model.config.recipe.learning_rate`,
the label-smoothed target from the training loss itself, beam search from `viz_model.search.decoding`. What the user
types
(matrices, sizes, seeds) is checked here, and a bad value raises `InputError` with a message that says what to fix.
"""

from __future__ import annotations

import math
import random
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..config import ConfigError, ModelConfig, TrainConfig, recipe
from ..config.checks import check_int
from ..config.recipe import cooldown_factor, label_smoothed_loss, learning_rate
from ..modeldir.checkpoint import CONFIG, TRAINING_LOG, CheckpointError, model_file
from ..modeldir.coverage import TRAINING_STATS, TrainingStats
from ..modeldir.training_facts import TRAINING_FACTS, TrainingFacts, read_log
from ..nn.attention import MultiHeadAttention, attention, attention_scores, causal_mask, masked_softmax
from ..nn.positional import ShiftCheck, shift_matrix, sinusoidal_table, wavelengths
from ..tokenization.tokenizer import PAD_ID

MAX_CELL = 10_000.0  # the largest magnitude a typed matrix cell may have
MAX_ROWS = 8  # inputs of the hand example
MAX_COLS = 8  # d_model / d_k / d_v of the hand example


class InputError(ValueError):
    """A value the user typed cannot be used; the message says why and what to do."""


# --- typed matrices ----------------------------------------------------------------------------------------------
def parse_matrix(table: pd.DataFrame | Sequence[Sequence[Any]], name: str) -> np.ndarray:
    """A float64 matrix from an edited table whose cells may be text; `InputError` names the first bad cell."""
    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(list(table))
    rows, cols = frame.shape
    if rows == 0 or cols == 0:
        raise InputError(f"{name} is empty: it needs at least one row and one column")
    if rows > MAX_ROWS or cols > MAX_COLS:
        raise InputError(f"{name} is {rows} × {cols}; at most {MAX_ROWS} × {MAX_COLS} here (a lesson, not a model)")
    out = np.zeros((rows, cols), dtype=np.float64)
    for i in range(rows):
        for j in range(cols):
            cell = frame.iat[i, j]
            where = f"{name}, row {i + 1}, column {j + 1}"
            if cell is None or (isinstance(cell, float) and math.isnan(cell)) or (
                    isinstance(cell, str) and not cell.strip()):
                raise InputError(f"{where} is empty: type a number")
            if isinstance(cell, (bool, np.bool_)):
                raise InputError(f"{where} is {cell!r}, not a number")
            try:
                value = float(cell.strip().replace("−", "-")) if isinstance(cell, str) else float(cell)
            except (TypeError, ValueError):
                raise InputError(f"{where} is {str(cell)[:20]!r}, not a number") from None
            if not math.isfinite(value):
                raise InputError(f"{where} is {value}: only finite numbers")
            if abs(value) > MAX_CELL:
                raise InputError(f"{where} is {value:g}: keep values within ±{MAX_CELL:,.0f} (larger ones only "
                                 "saturate the softmax and overflow the tables)")
            out[i, j] = value
    return out


def matrix_frame(values: np.ndarray, col_prefix: str) -> pd.DataFrame:
    """An editable table of a matrix: text cells (so any typing reaches `parse_matrix`), numbered columns and a plain
    row index (so the editor can add rows)."""
    values = np.asarray(values, dtype=np.float64)
    return pd.DataFrame([[f"{v:g}" for v in row] for row in values],
                        columns=[f"{col_prefix}{j + 1}" for j in range(values.shape[1])])


def resized(values: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """`values` cut or zero-padded to ``rows × cols``."""
    out = np.zeros((rows, cols), dtype=np.float64)
    r, c = min(rows, values.shape[0]), min(cols, values.shape[1])
    out[:r, :c] = values[:r, :c]
    return out


def whole_number(name: str, value: object, low: int, high: int) -> int:
    """A number typed on a page as a whole number (3.0 counts) from `low` to `high`, else an `InputError` naming it."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    check_int(name, value, error=InputError, kinds=(int, np.integer),
              message=f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return check_int(name, value, low, high, error=InputError, kinds=(int, np.integer),
                     message=f"{name} must be from {low} to {high}, got {value}")


def check_float(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not math.isfinite(value):
        raise InputError(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")
    if not low <= float(value) <= high:
        raise InputError(f"{name} must be from {low:g} to {high:g}, got {value:g}")
    return float(value)


# --- attention by hand -------------------------------------------------------------------------------------------
EXAMPLE_X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=np.float64)
EXAMPLE_WQ = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float64)
EXAMPLE_WK = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float64)
EXAMPLE_WV = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=np.float64)
# The numbers the source notes print for this example (shared/docs/paper-notes.md): no 1/sqrt(d_k) scaling.
NOTES = {
    "queries": [[1, 0, 2], [2, 2, 2], [2, 1, 3]],
    "keys": [[0, 1, 1], [4, 4, 0], [2, 3, 1]],
    "values": [[1, 2, 3], [2, 8, 0], [2, 6, 3]],
    "scores_q1": [2, 4, 4],
    "softmax_q1": [0.0634, 0.4683, 0.4683],  # "about"
    "softmax_q1_rounded": [0.0, 0.5, 0.5],
    "output1_rounded": [2.0, 7.0, 1.5],
    "output1_exact": [1.94, 6.68, 1.60],
}


def is_example(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray) -> bool:
    """True when the inputs are the notes' worked example, unchanged."""
    return all(a.shape == b.shape and np.array_equal(a, b)
               for a, b in ((x, EXAMPLE_X), (wq, EXAMPLE_WQ), (wk, EXAMPLE_WK), (wv, EXAMPLE_WV)))


def check_shapes(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray) -> None:
    """The products X W_q, X W_k, X W_v and Q K^T must exist; `InputError` says which one does not."""
    d_in = x.shape[1]
    for name, w in (("W_q", wq), ("W_k", wk), ("W_v", wv)):
        if w.shape[0] != d_in:
            raise InputError(f"{name} has {w.shape[0]} rows but X has {d_in} columns: X {name} needs them equal "
                             f"(add or delete rows of {name}, or change the width of X)")
    if wq.shape[1] != wk.shape[1]:
        raise InputError(f"W_q gives queries of width {wq.shape[1]} but W_k keys of width {wk.shape[1]}: "
                         "Q Kᵀ needs d_k equal")


@dataclass
class HandAttention:
    """Every intermediate of ``softmax(Q Kᵀ [/ √d_k]) V`` for a small example (float64 tables)."""

    q: np.ndarray  # (n, d_k)
    k: np.ndarray
    v: np.ndarray  # (n, d_v)
    scores: np.ndarray  # (n, n), scaled when `scaled`
    weights: np.ndarray  # (n, n)
    weighted: np.ndarray  # (n, n, d_v): weights[i, j] * v[j]
    output: np.ndarray  # (n, d_v)
    mask: np.ndarray | None  # (n, n) bool, True = may attend
    scaled: bool
    d_k: int


def attention_by_hand(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray, scale: bool = False,
                      causal: bool = False) -> HandAttention:
    """The example through the library: `attention_scores`, `causal_mask`, and `attention` (its math path)."""
    check_shapes(x, wq, wk, wv)
    xt = torch.tensor(x, dtype=torch.float64)
    q, k, v = (xt @ torch.tensor(w, dtype=torch.float64) for w in (wq, wk, wv))
    q4, k4, v4 = q[None, None], k[None, None], v[None, None]  # (batch 1, head 1, n, d)
    mask = causal_mask(x.shape[0]) if causal else None
    scores = attention_scores(q4, k4, scale=scale)
    out, weights = attention(q4, k4, v4, mask, need_weights=True, scale=scale, impl="math")
    w = weights[0, 0].numpy()
    return HandAttention(q=q.numpy(), k=k.numpy(), v=v.numpy(), scores=scores[0, 0].numpy(), weights=w,
                         weighted=w[:, :, None] * v.numpy()[None, :, :], output=out[0, 0].numpy(),
                         mask=None if mask is None else mask[0, 0].numpy(), scaled=scale, d_k=q.shape[1])


def round_like_notes(weights: np.ndarray) -> np.ndarray:
    """The notes' rounding of a softmax row: to the nearest 0.5 (so [0.06, 0.47, 0.47] reads [0, 0.5, 0.5])."""
    return np.round(np.asarray(weights) * 2) / 2


@dataclass
class MultiHeadSteps:
    """Multi-head attention opened up: per-head projections, weights and outputs, the concatenation, W_O."""

    heads: int
    d_head: int
    q: np.ndarray  # (heads, n, d_head)
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray  # (heads, n, n)
    head_outputs: np.ndarray  # (heads, n, d_head)
    concat: np.ndarray  # (n, d_model)
    output: np.ndarray  # (n, d_model): concat W_O
    module_output: np.ndarray  # MultiHeadAttention.forward on the same input
    w_q: np.ndarray  # (d_model, d_model), as x @ w_q
    w_o: np.ndarray

    @property
    def difference(self) -> float:
        return float(np.abs(self.output - self.module_output).max())


def multi_head_by_hand(x: np.ndarray, heads: int, seed: int = 0, causal: bool = False) -> MultiHeadSteps:
    """Split, attend, concatenate, project, with the library's `MultiHeadAttention` (random weights from `seed`,
    zero biases), and its own forward pass as the check."""
    d_model = x.shape[1]
    heads = whole_number("the number of heads", heads, 1, d_model)
    if d_model % heads:
        raise InputError(f"d_model = {d_model} (the width of X) is not divisible by {heads} heads; "
                         f"pick one of {', '.join(str(h) for h in range(1, d_model + 1) if d_model % h == 0)}")
    seed = whole_number("the seed", seed, 0, 2**31 - 1)
    module = MultiHeadAttention(d_model, heads).double().eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for linear in (module.w_q, module.w_k, module.w_v, module.w_o):
            linear.weight.copy_(torch.randn(linear.weight.shape, generator=generator, dtype=torch.float64)
                                / math.sqrt(d_model))
            linear.bias.zero_()
        xt = torch.tensor(x, dtype=torch.float64)[None]
        mask = causal_mask(x.shape[0]) if causal else None
        q = module.split_heads(module.w_q(xt))
        k = module.split_heads(module.w_k(xt))
        v = module.split_heads(module.w_v(xt))
        head_out, weights = attention(q, k, v, mask, need_weights=True, impl="math")
        concat = module.merge_heads(head_out)
        output = module.w_o(concat)
        reference, _, _ = module(xt, None, mask, need_weights=True)
    return MultiHeadSteps(heads, module.d_head, q[0].numpy(), k[0].numpy(), v[0].numpy(), weights[0].numpy(),
                          head_out[0].numpy(), concat[0].numpy(), output[0].numpy(), reference[0].numpy(),
                          module.w_q.weight.detach().T.numpy().copy(), module.w_o.weight.detach().T.numpy().copy())


def saturation(dims: Sequence[int], keys: int = 10, samples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Softmax entropy and max weight of random unit-variance queries/keys, per d_k, with and without 1/√d_k.

    Scores and softmax are the library's (`attention_scores`, `masked_softmax`). One row per (d_k, scaled).
    """
    keys = whole_number("the number of keys", keys, 2, 512)
    samples = whole_number("the number of samples", samples, 10, 20_000)
    seed = whole_number("the seed", seed, 0, 2**31 - 1)
    if not dims:
        raise InputError("pick at least one d_k")
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for d in dims:
        d = whole_number("d_k", d, 1, 4096)
        q = torch.randn(samples, 1, 1, d, generator=generator)
        k = torch.randn(samples, 1, keys, d, generator=generator)
        for scale in (False, True):
            scores = attention_scores(q, k, scale=scale)
            w = masked_softmax(scores, None)[:, 0, 0]
            entropy = -(w * torch.log(w.clamp_min(1e-30))).sum(-1)
            rows.append({"d_k": d, "scaled": scale, "entropy": float(entropy.mean()),
                         "max_weight": float(w.max(-1).values.mean()), "score_std": float(scores.std())})
    return pd.DataFrame(rows)


# --- positional encodings ----------------------------------------------------------------------------------------
def pe_table(length: int, d_model: int, double: bool = False, layout: str = "interleaved",
             frequencies: str = "paper", first: int = 0) -> np.ndarray:
    """The model's sinusoids (`sinusoidal_table`, in the model's layout and frequencies, positions counted from
    row `first` as the model's ``position_offset`` says), float32 as the model adds them, or float64."""
    return sinusoidal_table(length + first, d_model, dtype=torch.float64 if double else torch.float32, layout=layout,
                            frequencies=frequencies)[first:].numpy()


def pair_wavelengths(d_model: int, frequencies: str = "paper") -> np.ndarray:
    return wavelengths(d_model, frequencies=frequencies).numpy()


def dot_similarity(table: np.ndarray) -> np.ndarray:
    """PE(p) · PE(q) for every pair of positions."""
    table = np.asarray(table, dtype=np.float64)
    return table @ table.T


def similarity_profile(similarity: np.ndarray) -> pd.DataFrame:
    """PE(p)·PE(q) against the distance |p − q|: mean, min and max over the pairs at each distance.

    For sinusoids min = max: the dot product depends on the distance only, sum_i cos(ω_i (p − q)).
    """
    n = similarity.shape[0]
    rows = []
    for offset in range(n):
        values = np.diagonal(similarity, offset)
        rows.append({"distance": offset, "mean": float(values.mean()), "min": float(values.min()),
                     "max": float(values.max()), "pairs": len(values)})
    return pd.DataFrame(rows)


def shift_check(k: int, length: int, d_model: int) -> ShiftCheck:
    """The shift-linearity of the sinusoids, checked numerically with `shift_matrix` and `sinusoidal_table`."""
    k = whole_number("the offset k", k, -100_000, 100_000)
    length = whole_number("the number of positions", length, 1, 100_000)
    matrix = shift_matrix(k, d_model)
    start = max(0, -k)
    if start >= length:
        raise InputError(f"no position p in 0..{length - 1} has p + k ≥ 0 for k = {k}; draw more positions or "
                         "pick a smaller |k|")
    p = torch.arange(start, length)
    errors = []
    for dtype in (torch.float32, torch.float64):
        table = sinusoidal_table(length + max(k, 0), d_model, dtype=dtype).double()
        errors.append((table[p] @ matrix.T - table[p + k]).abs().max(dim=1).values.numpy())
    return ShiftCheck(k, matrix.numpy(), p.numpy(), errors[0], errors[1])


def training_max_length(directory: Path | None, facts: TrainingFacts | None, stats: TrainingStats | None = None
                        ) -> tuple[int | None, str]:
    """The longest training sequence (tokens), if the model directory records it: (length, where it was found).

    The training statistics come first: the explorer's input warnings read the same number, so pages agree."""
    if stats is not None:
        return stats.max_source_tokens, f"{TRAINING_STATS} (longest training source, pieces + </s>)"
    if directory is not None:
        try:
            events = training_events(directory)
        except InputError:  # the training page says why; here the length is simply not known from the log
            events = []
        for event in events:
            for key in ("max_len", "longest_train", "max_train_length"):
                value = event.get(key)
                if isinstance(value, int) and value > 0:
                    return value, f"{TRAINING_LOG} ({key})"
    if facts is not None:
        return facts.max_len, f"{TRAINING_FACTS} (max_len: the longest training pair kept)"
    return None, ""


def positional_kinds(root: Path, names: Sequence[str]) -> dict[str, str]:
    """Model name -> "sinusoidal" / "learned", from each directory's config.json (weights are not loaded)."""
    kinds = {}
    for name in names:
        try:
            kinds[name] = ModelConfig.load(model_file(root / name, CONFIG)).positional
        except (ConfigError, CheckpointError, OSError):
            continue
    return kinds


def shuffle_words(text: str, seed: int) -> str:
    """The sentence with its words (whitespace-separated) in another order, the same for the same seed."""
    seed = whole_number("the seed", seed, 0, 2**31 - 1)
    words = text.split()
    if len(set(words)) < 2:
        raise InputError("shuffling needs at least two different words in the sentence")
    rng = random.Random(seed)
    order = list(range(len(words)))
    while True:
        rng.shuffle(order)
        shuffled = [words[i] for i in order]
        if shuffled != words:
            return " ".join(shuffled)


# --- the training recipe -----------------------------------------------------------------------------------------
def recipe_summary(facts: TrainingFacts) -> str:
    """The schedule and loss settings of a run, in one line (from its training facts, not from the card)."""
    scale = f"peak lr {facts.lr_peak:g}" if facts.lr_peak else f"lr scale {facts.lr_scale:g}"
    cooldown = f", cooldown over the last {facts.cooldown_epochs} of {facts.epochs} epochs" if facts.cooldown_epochs \
        else ""
    return (f"{facts.warmup_steps:,} warm-up steps, {scale}{cooldown}, label smoothing {facts.label_smoothing:g}; "
            f"trained for {facts.trained_epochs} epochs ({facts.steps:,} steps, {facts.steps_per_epoch:,} per epoch)")


def schedule_config(d_model: int, warmup: int, lr_scale: float = 1.0, lr_peak: float = 0.0, epochs: int = 1,
                    cooldown_epochs: int = 0) -> TrainConfig:
    """A TrainConfig carrying only what the trainer's schedule reads (d_model, warm-up, scale or peak, and the
    run's epochs with its cooldown)."""
    d_model = whole_number("d_model", d_model, 1, 16_384)
    warmup = whole_number("warm-up steps", warmup, 1, 10_000_000)
    lr_scale = check_float("the lr scale", lr_scale, 0.0, 1000.0)
    lr_peak = check_float("the peak learning rate", lr_peak, 0.0, 1.0)
    epochs = whole_number("the number of epochs", epochs, 1, 100_000)
    cooldown_epochs = whole_number("the cooldown epochs", cooldown_epochs, 0, 100_000)
    try:
        return recipe.schedule_config(d_model, warmup, lr_scale, lr_peak, epochs, cooldown_epochs)
    except ConfigError as err:
        raise InputError(str(err)) from None


def schedule(cfg: TrainConfig, steps: Sequence[int], epoch_steps: int = 1) -> np.ndarray:
    """The learning rate the trainer uses at each 1-based step: `learning_rate` times `cooldown_factor`, for a run
    of `cfg.epochs` epochs of `epoch_steps` steps each."""
    epoch_steps = whole_number("the steps per epoch", epoch_steps, 1, 10_000_000)
    return np.array([learning_rate(int(s), cfg) * cooldown_factor((int(s) - 1) // epoch_steps,
                                                                   (int(s) - 1) % epoch_steps, epoch_steps, cfg)
                     for s in steps], dtype=np.float64)


def schedule_steps(total: int, points: int = 400, marks: Sequence[int] = ()) -> np.ndarray:
    """Steps 1..total to draw a schedule at (`points` of them, plus `marks`, e.g. the warm-up, where it peaks)."""
    total = whole_number("the number of steps", total, 10, 10_000_000)
    grid = np.linspace(1, total, points).round().astype(int)
    return np.unique(np.concatenate([grid, [m for m in marks if 1 <= m <= total]]).astype(int))


def smoothed_target(epsilon: float, vocab: int, target: int = 1) -> np.ndarray:
    """The distribution the training loss pulls the model towards, read off the loss itself.

    `label_smoothed_loss` (the trainer's) is differentiated at uniform logits: its gradient is ``p − q``, so the
    target is ``q = p − grad``. Analytically ``q = (1 − ε) one_hot(target) + ε / V``.
    """
    epsilon = check_float("ε (label smoothing)", epsilon, 0.0, 0.99)
    vocab = whole_number("the vocabulary size", vocab, 2, 1_000_000)
    target = whole_number("the target token", target, 0, vocab - 1)
    if target == PAD_ID:
        raise InputError(f"token {PAD_ID} is <pad>, which the loss skips; pick another target token")
    logits = torch.zeros(1, vocab, dtype=torch.float64, requires_grad=True)
    loss, _ = label_smoothed_loss(logits, torch.tensor([target]), epsilon)
    loss.backward()
    assert logits.grad is not None
    probs = torch.softmax(logits.detach()[0], dim=-1)
    return (probs - logits.grad[0]).numpy()


def training_events(directory: Path | None) -> list[dict[str, Any]]:
    """The model directory's JSON-lines training log (empty when it has none), read under the checks every model
    file gets (inside the directory, no link out of it, a size cap): a bad one is an `InputError` naming it."""
    if directory is None or not (directory / TRAINING_LOG).exists():
        return []
    try:
        return read_log(model_file(directory, TRAINING_LOG))
    except CheckpointError as err:
        raise InputError(str(err)) from None


# --- why self-attention: a live measurement ----------------------------------------------------------------------
COMPLEXITY = pd.DataFrame([
    {"layer": "self-attention", "complexity per layer": "O(n²·d)", "sequential operations": "O(1)",
     "maximum path length": "O(1)"},
    {"layer": "recurrent", "complexity per layer": "O(n·d²)", "sequential operations": "O(n)",
     "maximum path length": "O(n)"},
    {"layer": "convolutional", "complexity per layer": "O(k·n·d²)", "sequential operations": "O(1)",
     "maximum path length": "O(log_k(n))"},
    {"layer": "self-attention (restricted)", "complexity per layer": "O(r·n·d)", "sequential operations": "O(1)",
     "maximum path length": "O(n/r)"},
])
LAYER_NAMES = ("self-attention (explicit weights)", "self-attention (fused kernel)", "recurrent (RNN)",
               "convolution")
MAX_MEASURE_LENGTH = 2048
MAX_MEASURE_BYTES = 256 * 2**20  # one measurement's tensors, on a server every session shares


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a function's result (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


class PeakTensorMemory(TorchFunctionMode):
    """Bytes of tensor storage created inside the block and still alive, at their peak (any device).

    Counts the results of every torch function called in the block (PyTorch's public `TorchFunctionMode`)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: set[int] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        for tensor in _tensors(out):
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key in self._seen or storage.nbytes() == 0:
                continue
            self._seen.add(key)
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(tensor, self._free, storage.nbytes(), key)
        return out

    def _free(self, nbytes: int, key: int) -> None:
        self.live -= nbytes
        self._seen.discard(key)


def compared_layers(d_model: int, heads: int, kernel: int) -> dict[str, Callable[[torch.Tensor], Any]]:
    """The four layers the page compares, by their `LAYER_NAMES`, each a function of a ``(1, n, d_model)`` input."""
    attn = MultiHeadAttention(d_model, heads).eval()
    rnn = nn.RNN(d_model, d_model, batch_first=True).eval()
    conv = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2).eval()
    return {
        LAYER_NAMES[0]: lambda x: attn(x, need_weights=True),
        LAYER_NAMES[1]: lambda x: attn(x),
        LAYER_NAMES[2]: lambda x: rnn(x),
        LAYER_NAMES[3]: lambda x: conv(x.transpose(1, 2)),
    }


def measure_memory_bytes(n: int, d_model: int, heads: int, kernel: int) -> int:
    """Peak memory one measurement may hold: the explicit path's scores and weights (heads x n x n, twice), the
    input and a few activations of width d, and the layers' weights (float32)."""
    return 4 * (2 * heads * n * n + 8 * n * d_model + 6 * d_model * d_model + kernel * d_model * d_model)


def measure_layers(lengths: Sequence[int], d_model: int, heads: int, kernel: int = 3, repeats: int = 5,
                   progress: Callable[[float], None] | None = None,
                   layers: Mapping[str, Callable[[torch.Tensor], Any]] | None = None) -> pd.DataFrame:
    """Time (median of `repeats`) and peak activation memory of one forward pass of each layer kind, per length.

    Self-attention is the library's `MultiHeadAttention`, with the weights materialised (the instrumented path)
    and without (the fused kernel inference uses); the recurrent layer is `nn.RNN`, the convolution `nn.Conv1d`.
    Every layer first runs on every length (a warm-up: thread pools, kernel choice and allocations happen then),
    so the first size timed pays no one-off cost; then each runs `repeats` timed passes and one counted for memory.
    `layers` (name -> function of a ``(1, n, d_model)`` input) measures others instead. A request whose tensors
    would exceed MAX_MEASURE_BYTES (a server every session shares) is refused with the limit named.
    """
    if not lengths:
        raise InputError("pick at least one sequence length")
    lengths = sorted({whole_number("a sequence length", n, 1, MAX_MEASURE_LENGTH) for n in lengths})
    d_model = whole_number("d", d_model, 2, 2048)
    heads = whole_number("heads", heads, 1, d_model)
    if d_model % heads:
        raise InputError(f"d = {d_model} is not divisible by {heads} heads")
    kernel = whole_number("the kernel width k", kernel, 1, 31)
    repeats = whole_number("repeats", repeats, 1, 20)
    needed = measure_memory_bytes(lengths[-1], d_model, heads, kernel)
    if needed > MAX_MEASURE_BYTES:
        raise InputError(f"n = {lengths[-1]} with d = {d_model} and {heads} heads needs about {needed / 2**20:,.0f} MB "
                         f"(the {heads} × n × n attention weights above all); the limit per request is "
                         f"{MAX_MEASURE_BYTES // 2**20} MB on this shared server: pick fewer heads or shorter lengths")
    generator = torch.Generator().manual_seed(0)
    with torch.random.fork_rng(devices=[]):  # the layers' random init must not move the process's RNG
        torch.manual_seed(0)
        layers = compared_layers(d_model, heads, kernel) if layers is None else dict(layers)
    inputs = {n: torch.randn(1, n, d_model, generator=generator) for n in lengths}
    rows = []
    total, done = len(lengths) * len(layers), 0
    with torch.inference_mode():
        for x in inputs.values():  # warm-up
            for run in layers.values():
                run(x)
        for n, x in inputs.items():
            for name, run in layers.items():
                times = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    run(x)
                    times.append(time.perf_counter() - started)
                tracker = PeakTensorMemory()
                with tracker:
                    result = run(x)
                del result
                rows.append({"layer": name, "n": n, "ms": 1000 * float(np.median(times)),
                             "peak_mib": tracker.peak / 2**20})
                done += 1
                if progress is not None:
                    progress(done / total)
    return pd.DataFrame(rows)


def labelled(values: np.ndarray, rows: Sequence[str] | str, cols: Sequence[str] | str) -> pd.DataFrame:
    """A matrix as a table with row and column labels (a prefix string numbers them from 1)."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    r = [f"{rows}{i + 1}" for i in range(values.shape[0])] if isinstance(rows, str) else list(rows)
    c = [f"{cols}{j + 1}" for j in range(values.shape[1])] if isinstance(cols, str) else list(cols)
    return pd.DataFrame(values, index=r, columns=c)
