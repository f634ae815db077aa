"""Small decoder-only folders (hf_lm.py) fitted by transformers to continue ``"<English sentence> ="`` with its
word-for-word German and the end-of-text id (random weights never end), and ``generate``'s continuations of them; the
fitting tests/library/test_hf_generate_lm.py and benchmarks/bench_fitted_families.py share."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import torch

from support.fit_cache import cached_folder
from support.hf import WORDS_EN, word_for_word
from support.hf_batches import generate_rows, up_to
from support.hf_lm import CONFIGS, build_lm_folder

NEW_TOKENS = 40  # room for the German and the end-of-text id
FIT_SEED = 5000  # fitting step s reads sentences(16, FIT_SEED + s)


def sentences(count: int, seed: int) -> list[str]:
    """`count` sentences of 2 to 5 test words (short: a 2-layer model of width 32 fits them in seconds)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS_EN) for _ in range(rng.randint(2, 5))).capitalize() + rng.choice(".!?")
            for _ in range(count)]


def example(text: str) -> str:
    """What the fitted model reads: a sentence, ``=``, its word-for-word German."""
    return f"{text} = {word_for_word(text)}"


def seen_in_fitting(steps: int) -> set[str]:
    """Every sentence `fit_lm` reads in `steps` steps (what a held-out prompt must not be)."""
    return {text for step in range(steps) for text in sentences(16, FIT_SEED + step)}


def fit_lm(model, tokenizer, eos: int, steps: int, lr: float = 1e-2) -> None:
    """Train a transformers causal language model in place for `steps` Adam steps on `example` texts, each ending
    in `eos` (the loss on every token, padding masked)."""
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    model.train()
    for step in range(steps):
        rows = [tokenizer(example(t)).input_ids + [eos] for t in sentences(16, FIT_SEED + step)]
        width = max(map(len, rows))
        ids = torch.tensor([r + [eos] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        labels = ids.masked_fill(mask == 0, -100)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def fit_folder(folder: Path, name: str, steps: int = 300, lr: float = 1e-2, changes: dict | None = None):
    """`folder` (family `name`, built by hf_lm.build_lm_folder) refitted in place: a model of its config (with
    `changes` set) from transformers' own initialisation, fitted for `steps` steps at `lr` and saved; returns
    (transformers' model reloaded with eager attention, its tokenizer)."""
    import transformers

    model_class = getattr(transformers, CONFIGS[name][1])
    config = transformers.AutoConfig.from_pretrained(folder)
    for key, value in (changes or {}).items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = model_class(config)  # transformers' own initialisation fits in a few hundred steps
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    fit_lm(model, tokenizer, config.eos_token_id, steps=steps, lr=lr)
    model.save_pretrained(folder)
    return model_class.from_pretrained(folder, attn_implementation="eager").eval(), tokenizer


def fitted_lm_folder(cache: Path, name: str, steps: int = 300, lr: float = 1e-2, changes: dict | None = None) -> Path:
    """Family `name`'s folder built by hf_lm.build_lm_folder and fitted by `fit_folder` (`steps`, `lr`, `changes`),
    cached under `cache` by what makes it (support.fit_cache)."""
    def make(staging: Path) -> None:
        with tempfile.TemporaryDirectory() as root:
            folder = build_lm_folder(Path(root), name)
            fit_folder(folder, name, steps=steps, lr=lr, changes=changes)
            shutil.copytree(folder, staging, dirs_exist_ok=True)

    code = ("support/hf.py", "support/hf_lm.py", "support/hf_lm_fit.py")
    return cached_folder(cache, name, [name, steps, lr, changes], make, code=code)


def continuations(model, tokenizer, prompts: list[str], eos: list[int],
                  **settings) -> list[tuple[list[int], list[int]]]:
    """Each prompt's ids and what ``generate(do_sample=False)`` continues it with, up to the end-of-text id, as it
    does the prompt alone (prompts of one length in one batch: support.hf_batches)."""
    inputs = [tokenizer(prompt).input_ids for prompt in prompts]
    rows = generate_rows(model, inputs, mask=True, do_sample=False, max_new_tokens=NEW_TOKENS, **settings)
    return [(ids, up_to(row[len(ids):], eos)) for ids, row in zip(inputs, rows)]  # beam search pads after the end


def generated(model, tokenizer, prompt: str, eos: list[int], **settings) -> tuple[list[int], list[int]]:
    """The prompt's ids and what ``generate(do_sample=False)`` continues it with, up to the end-of-text id."""
    return continuations(model, tokenizer, [prompt], eos, **settings)[0]
