"""A Pythia-style training run for the series tests: a tiny GPT-NeoX trained a few steps by transformers on repeated
random tokens and saved with save_pretrained at each of `STEPS` (``checkpoint-N``, as transformers' Trainer names
them), fitted once and kept on disk (`support.fit_cache`); and the same run imported as a series folder of
``step-N`` model directories, as the explorer opens it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.fit_cache import cache_dir, cached_folder

STEPS = (0, 4, 8)


def train_run(root: Path) -> None:
    """Train the tiny GPT-NeoX of `support.hf_lm` for `STEPS[-1]` Adam steps, saving it at each step of `STEPS`."""
    import torch
    import transformers

    from support.hf_lm import build_lm_folder

    base = build_lm_folder(root / ".base", "gpt_neox")
    model = transformers.GPTNeoXForCausalLM.from_pretrained(base, attn_implementation="eager")
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    shutil.rmtree(root / ".base")
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, foreach=True)
    generator = torch.Generator().manual_seed(0)
    for step in range(STEPS[-1] + 1):
        if step in STEPS:
            model.save_pretrained(root / f"checkpoint-{step}")
            tokenizer.save_pretrained(root / f"checkpoint-{step}")
        tokens = torch.randint(3, 290, (4, 10), generator=generator)
        ids = torch.cat([tokens, tokens], dim=1)
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@pytest.fixture(scope="session")
def neox_run(request, tmp_path_factory) -> Path:
    """The run's folder of ``checkpoint-N`` folders (transformers' format), fitted once per recipe and versions."""
    pytest.importorskip("transformers")
    return cached_folder(cache_dir(request, tmp_path_factory, "fitted-series"), "neox-run", list(STEPS), train_run,
                         code=("support/neox_run.py", "support/hf_lm.py"),
                         made=f"checkpoint-{STEPS[-1]}/config.json")


def imported_series(run: Path, series_dir: Path) -> Path:
    """`run`'s checkpoints imported (self-contained) as the series folder `series_dir`, one ``step-N`` model
    directory per step; returns it."""
    from viz_model.hf.importer import import_model

    for step in STEPS:
        import_model(str(run / f"checkpoint-{step}"), series_dir / f"step-{step}", copy=True)
    return series_dir


def with_other_tokenizer(step_folder: Path, copy: Path) -> Path:
    """A copy of the checkpoint `step_folder` whose tokenizer has two pieces' ids swapped: another tokenizer."""
    import json

    shutil.copytree(step_folder, copy)
    path = copy / "tokenizer.json"
    data = json.loads(path.read_text())
    vocab = data["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[100:102]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    path.write_text(json.dumps(data))
    return copy
