"""Which explanation is faithful, without gold data: delete what a method ranks highest and watch the prediction.

For output token i and a method's scores over the source tokens, the k highest-ranked source tokens are removed
(their positions become padding: masked out of every attention, the other positions keep theirs), and the drop of
``log p(y_i)`` is measured (**comprehensiveness**, higher = the method found what the prediction needs); keeping
only those k is **sufficiency** (the drop when everything else is removed; lower = they suffice). Both are compared
with removing k random source tokens (the mean over several draws). The target prefix stays as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..batching import pad
from ..model import Transformer

DEFAULT_KS = (1, 2, 3)
RANDOM = "random"
RANDOM_DRAWS = 8


def _all_log_probs(network: Transformer, sources: list[tuple[int, ...]], tgt: list[int], output_ids: list[int],
                   chunk: int = 256) -> np.ndarray:
    """``(sources, outputs)``: ``log p(y_i)`` at every output position, for each (masked) source."""
    pad_id = network.config.pad_id
    device = next(network.parameters()).device
    outputs = torch.tensor(output_ids, device=device)
    rows = []
    with torch.inference_mode():
        for start in range(0, len(sources), chunk):
            part = sources[start:start + chunk]
            src = pad([list(s) for s in part], pad_id).to(device)
            logits = network(src, torch.tensor([tgt], device=device).expand(len(part), -1)).logits.float()
            log_probs = torch.log_softmax(logits, dim=-1)
            rows.append(log_probs.gather(-1, outputs.expand(len(part), -1)[..., None])[..., 0].double().cpu())
    return torch.cat(rows).numpy()


def _masked(source_ids: Sequence[int], removed: Iterable[int], pad_id: int) -> tuple[int, ...]:
    out = list(source_ids)
    for position in removed:
        out[int(position)] = pad_id
    return tuple(out)


def deletion_scores(network: Transformer, source_ids: list[int], output_ids: list[int],
                    rankings: Mapping[str, np.ndarray], ks: Sequence[int] = DEFAULT_KS, draws: int = RANDOM_DRAWS,
                    seed: int = 0) -> pd.DataFrame:
    """Comprehensiveness and sufficiency of each method's source ranking for every output token.

    `rankings`: method -> ``(outputs, src_len)`` scores (higher = more important). Returns one row per method
    (plus ``random``: the mean over `draws` random sets of k positions, the same sets for every output), output
    position and k: ``comprehensiveness`` and ``sufficiency`` (drops in log-probability). Every distinct masked
    source runs once, in batches.
    """
    src_len, outputs = len(source_ids), len(output_ids)
    for method, scores in rankings.items():
        if np.shape(scores) != (outputs, src_len):
            raise ValueError(f"{method}: scores of shape {np.shape(scores)}, expected (outputs={outputs}, "
                             f"source tokens={src_len})")
    ks = sorted({k for k in ks if 1 <= k < src_len}) or [1]
    pad_id = network.config.pad_id
    everything = range(src_len)
    index: dict[tuple[int, ...], int] = {tuple(source_ids): 0}

    def slot(removed: Iterable[int]) -> int:
        return index.setdefault(_masked(source_ids, removed, pad_id), len(index))

    plan: list[tuple[str, int, int, list[int], list[int]]] = []  # method, k, output, removed slots, kept slots
    orders = {m: np.argsort(-np.asarray(s, dtype=np.float64), axis=1, kind="stable") for m, s in rankings.items()}
    generator = np.random.default_rng(seed)
    for k in ks:
        for method, order in orders.items():
            for i in range(outputs):
                top = order[i, :k].tolist()
                plan.append((method, k, i, [slot(top)], [slot(set(everything) - set(top))]))
        subsets = [generator.permutation(src_len)[:k].tolist() for _ in range(draws)]
        removed, kept = [slot(s) for s in subsets], [slot(set(everything) - set(s)) for s in subsets]
        plan += [(RANDOM, k, i, removed, kept) for i in range(outputs)]
    sources = sorted(index, key=index.get)
    log_probs = _all_log_probs(network, sources, [network.config.bos_id, *output_ids[:-1]], output_ids)
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
