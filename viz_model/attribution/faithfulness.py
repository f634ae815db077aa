"""Which explanation is faithful, without gold data: delete what a method ranks highest and watch the prediction.

For output token i and a method's scores over the source tokens, the k highest-ranked source tokens are removed
(their positions become padding: masked out of every attention, the other positions keep theirs), and the drop of
``log p(y_i)`` is measured (**comprehensiveness**, higher = the method found what the prediction needs); keeping
only those k is **sufficiency** (the drop when everything else is removed; lower = they suffice). Both are compared
with removing k random source tokens (the mean over several draws). The target prefix stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..data.batching import pad
from ..nn.model import EncoderOutput, Transformer

DEFAULT_KS = (1, 2, 3)
RANDOM = "random"
RANDOM_DRAWS = 8


Kept = tuple[int, ...]  # the source positions a deletion keeps, in order


def _groups(rows: list[int], length: Callable[[int], int], chunk: int, fill: float = 0.75) -> list[list[int]]:
    """`rows` longest first, cut into batches of at most `chunk` in which every row is at least `fill` times as
    long as the first (little padding; few batches)."""
    groups: list[list[int]] = []
    for row in sorted(rows, key=length, reverse=True):
        if not groups or len(groups[-1]) == chunk or length(row) < fill * length(groups[-1][0]):
            groups.append([])
        groups[-1].append(row)
    return groups


def _needed_log_probs(network: Transformer, source_ids: Sequence[int], kept: list[Kept], needed: list[set[int]],
                      tgt: list[int], output_ids: list[int], chunk: int = 256) -> np.ndarray:
    """``(len(kept), outputs)``: ``log p(y_i)`` for each source reduced to its `kept` positions, at the output
    positions it is `needed` for (NaN elsewhere).

    A removed token is masked out of every attention, so it is left out of the encoder's input altogether (the
    others keep their positions: the same numbers, less work); the decoder runs only as far as the last output
    position a row needs, and only those positions are projected onto the vocabulary.
    """
    pad_id = network.config.pad_id
    weight = next(network.parameters())
    device = weight.device
    found = np.full((len(kept), len(output_ids)), np.nan)
    memory = torch.zeros(len(kept), len(source_ids), network.config.d_model, device=device, dtype=weight.dtype)
    real = torch.zeros(len(kept), len(source_ids), dtype=torch.bool, device=device)
    with torch.inference_mode():
        for rows in _groups(list(range(len(kept))), lambda r: len(kept[r]), chunk):
            src = pad([[source_ids[p] for p in kept[r]] for r in rows], pad_id).to(device)
            encoded = network.encode(src, position_ids=pad([kept[r] for r in rows], 0).to(device))
            memory[rows, :src.shape[1]] = encoded.hidden
            real[rows, :src.shape[1]] = encoded.mask[:, 0, 0]
        for rows in _groups(list(range(len(kept))), lambda r: max(needed[r]) + 1, chunk):
            width = max(len(kept[r]) for r in rows)
            mask = real[rows, :width]
            encoded = EncoderOutput(memory[rows, :width], mask[:, None, None], has_padding=bool((~mask).any()))
            length = max(needed[rows[0]]) + 1
            hidden = network.decode(torch.tensor([tgt[:length]], device=device).expand(len(rows), -1), encoded).hidden
            pairs = [(b, i) for b, r in enumerate(rows) for i in sorted(needed[r])]
            batch_index, output_index = (torch.tensor(column, device=device) for column in zip(*pairs))
            logits = network.logits(hidden[batch_index, output_index])
            log_probs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            picked = log_probs.gather(-1, torch.tensor(output_ids, device=device)[output_index, None])[:, 0]
            for (b, i), value in zip(pairs, picked.double().cpu().tolist()):
                found[rows[b], i] = value
    return found


def deletion_scores(network: Transformer, source_ids: list[int], output_ids: list[int],
                    rankings: Mapping[str, np.ndarray], ks: Sequence[int] = DEFAULT_KS, draws: int = RANDOM_DRAWS,
                    seed: int = 0) -> pd.DataFrame:
    """Comprehensiveness and sufficiency of each method's source ranking for every output token.

    `rankings`: method -> ``(outputs, src_len)`` scores (higher = more important). Returns one row per method
    (plus ``random``: the mean over `draws` random sets of k positions, the same sets for every output), output
    position and k: ``comprehensiveness`` and ``sufficiency`` (drops in log-probability). Every distinct reduced
    source runs once, in batches, only as far as the outputs that need it.
    """
    src_len, outputs = len(source_ids), len(output_ids)
    for method, scores in rankings.items():
        if np.shape(scores) != (outputs, src_len):
            raise ValueError(f"{method}: scores of shape {np.shape(scores)}, expected (outputs={outputs}, "
                             f"source tokens={src_len})")
    ks = sorted({k for k in ks if 1 <= k < src_len}) or [1]
    everything = range(src_len)
    all_outputs = set(range(outputs))
    index: dict[Kept, int] = {tuple(everything): 0}
    needed: list[set[int]] = [all_outputs]

    def slot(kept: Iterable[int], for_outputs: set[int]) -> int:
        row = index.setdefault(tuple(sorted(kept)), len(index))
        if row == len(needed):
            needed.append(set())
        needed[row] |= for_outputs
        return row

    plan: list[tuple[str, int, int, list[int], list[int]]] = []  # method, k, output, removed slots, kept slots
    orders = {m: np.argsort(-np.asarray(s, dtype=np.float64), axis=1, kind="stable") for m, s in rankings.items()}
    generator = np.random.default_rng(seed)
    for k in ks:
        for method, order in orders.items():
            for i in range(outputs):
                top = order[i, :k].tolist()
                plan.append((method, k, i, [slot(set(everything) - set(top), {i})], [slot(top, {i})]))
        subsets = [generator.permutation(src_len)[:k].tolist() for _ in range(draws)]
        removed = [slot(set(everything) - set(s), all_outputs) for s in subsets]
        kept = [slot(s, all_outputs) for s in subsets]
        plan += [(RANDOM, k, i, removed, kept) for i in range(outputs)]
    log_probs = _needed_log_probs(network, source_ids, sorted(index, key=index.get), needed,
                                  [network.config.bos_id, *output_ids[:-1]], output_ids)
    full = log_probs[0]
    table = [{"method": method, "output": i, "k": k,
              "comprehensiveness": full[i] - log_probs[removed, i].mean(),
              "sufficiency": full[i] - log_probs[kept, i].mean()} for method, k, i, removed, kept in plan]
    return pd.DataFrame(table, columns=["method", "output", "k", "comprehensiveness", "sufficiency"])


def summarise(deletions: pd.DataFrame) -> pd.DataFrame:
    """Per method: mean comprehensiveness and sufficiency over outputs and k, and how often the method beats random
    (its comprehensiveness above random's for the same output and k)."""
    random = deletions[deletions["method"] == RANDOM].set_index(["output", "k"])["comprehensiveness"]
    rows = []
    for method, group in deletions.groupby("method", sort=False):
        beats = (group.set_index(["output", "k"])["comprehensiveness"] > random.reindex(
            group.set_index(["output", "k"]).index)).mean()
        rows.append({"method": method, "comprehensiveness": group["comprehensiveness"].mean(),
                     "sufficiency": group["sufficiency"].mean(),
                     "beats_random": float(beats) if method != RANDOM else float("nan")})
    return pd.DataFrame(rows).sort_values("comprehensiveness", ascending=False, ignore_index=True)
