#!/usr/bin/env python
"""The attention sink and the induction heads of a language model folder (default: the shipped multi30k-lm-en),
measured by the pages' own functions: the Attention sinks page's first-token share of each head on the tour's prompt
and its default continuation (`trace_sink_shares`), and the Head roles page's induction and previous-token scores on
repeated random tokens (`repeated_roles`, Olsson et al.'s 25 tokens x4, 10 sequences). Results:
benchmarks/results/shipped_lm_heads.json (the model card quotes them).

    python benchmarks/shipped_lm_heads.py [--model DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_common import REPO, publish, repo_label

TOUR_PROMPT = "A dog runs on the grass. A dog runs"
NEW_TOKENS = 20  # the pages' default continuation (app.page_settings.LM_NEW_TOKENS)


def best(table, column: str) -> dict:
    """The head with the largest `column` of a roles table (1-based layer and head, as the pages print them)."""
    row = table.loc[table[column].idxmax()]
    return {"score": round(float(row[column]), 4), "layer": int(row["layer"]) + 1, "head": int(row["head"]) + 1}


def measure(model_dir: Path) -> dict:
    """The sink and head-role figures of the model in `model_dir`."""
    import numpy as np
    import torch

    import viz_model
    from viz_model.analysis.lm_head_roles import prompt_roles, repeated_roles
    from viz_model.analysis.sinks import trace_sink_shares

    torch.set_num_threads(1)
    model = viz_model.load(model_dir, device="cpu")
    shares = trace_sink_shares(model.trace(TOUR_PROMPT, NEW_TOKENS))
    first = np.nan_to_num(shares.first_token)
    layer, head = np.unravel_index(int(first.argmax()), first.shape)
    repeated = repeated_roles(model)
    return {
        "model": repo_label(model_dir), "prompt": TOUR_PROMPT, "new_tokens": NEW_TOKENS,
        "sink": {"best": round(float(first.max()), 4), "layer": int(layer) + 1, "head": int(head) + 1,
                 "mean": round(float(first.mean()), 4), "heads_above_0.3": int((first > 0.3).sum()),
                 "sink_rate": round(shares.sink_rate, 4),
                 "prompt_only_best": best(prompt_roles(model, TOUR_PROMPT), "first_token")},
        "induction": best(repeated, "induction"),
        "previous_token": best(repeated, "previous_token"),
        "repeated_first_token": best(repeated, "first_token"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "assets" / "multi30k-lm-en")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "shipped_lm_heads.json")
    args = parser.parse_args()
    found = measure(args.model)
    print(f"sink {found['sink']['best']} (layer {found['sink']['layer']} head {found['sink']['head']}), induction "
          f"{found['induction']['score']}", file=sys.stderr)
    publish(args.out, found, True)


if __name__ == "__main__":
    main()
