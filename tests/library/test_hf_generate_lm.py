"""Imported decoder-only language models continue prompts as ``generate`` does (issue 51), on fitted weights.

Each family's small model (tests/support/hf_lm.py; the research families in benchmarks/bench_fitted_families.py) is
fitted here (tests/support/hf_lm_fit.py), as the T5 / BART tests fit theirs, to continue ``"<English sentence> ="``
with its word-for-word German and the end-of-text id (random weights never end), saved, imported, and its greedy
and beam (4) continuations compared with ``generate(do_sample=False)``'s on 100 prompts each: every continuation
identical. fp32 on the CPU, one thread (a tiny model runs fastest so).
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.fit_cache import cache_dir  # noqa: E402
from support.hf import eager_model  # noqa: E402
from support.hf_lm import CONFIGS, RESEARCH, import_lm  # noqa: E402
from support.hf_lm_fit import NEW_TOKENS, continuations, fitted_lm_folder, sentences  # noqa: E402
from support.lens_check import assert_lens_equals_hidden_states  # noqa: E402
from support.patch_check import assert_patching_equals_pre_hooks  # noqa: E402

pytestmark = pytest.mark.slow

RATE = {"gemma2": 3e-3, "gemma3": 3e-3}  # they diverge at the others' 1e-2
# config changes for fitting: a window wider than test_hf_import_lm's (5, 6), so that the model sees the "=" it
# continues from (the examples, up to 41 tokens, still run past it); Gemma 2's soft caps at 5 (they still bite) where
# 2 and 1.5 keep every next token's probability too flat for beam search to end
CHANGES = {"mistral": {"sliding_window": 16}, "gemma3": {"sliding_window": 16},
           "gemma2": {"sliding_window": 16, "attn_logit_softcapping": 5.0, "final_logit_softcapping": 5.0}}
# the research families (issue 60) take minutes each to fit: benchmarks/bench_fitted_families.py fits them, on
# configs of their own, and counts their continuations; their exactness on random weights is test_hf_import_lm's
FAMILIES = [name for name in CONFIGS if name not in RESEARCH]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=FAMILIES)
def fitted(request, tmp_path_factory):
    """(transformers' model reloaded from the fitted folder, its tokenizer, the imported model) of one family (the
    folder fitted once, cached in pytest's cache folder)."""
    name = request.param
    folder = fitted_lm_folder(cache_dir(request, tmp_path_factory, "fitted-lms"), name, steps=300,
                              lr=RATE.get(name, 1e-2), changes=CHANGES.get(name))
    model, tokenizer = eager_model(CONFIGS[name][1], folder)
    return model, tokenizer, import_lm(folder, tmp_path_factory.mktemp("assets"))


@pytest.fixture(scope="module")
def reference(fitted):
    """generate's continuations of a beam width's 100 prompts (`(prompt, ids, continuation)` each), run once for the
    tests that compare with them (greedy: with and without a draft)."""
    model, tokenizer, imported = fitted

    @functools.cache
    def of(beam: int) -> list[tuple[str, list[int], list[int]]]:
        prompts = [f"{text} =" for text in sentences(100, 2026 + beam)]
        with warnings.catch_warnings():  # the Llama 2's trained positions, as in the test
            warnings.simplefilter("ignore", UserWarning)
            theirs = continuations(model, tokenizer, prompts, imported.tokenizer.eos_ids, num_beams=beam)
        return [(prompt, *pair) for prompt, pair in zip(prompts, theirs)]

    return of


@pytest.mark.parametrize("beam, draft", [(1, "off"), (4, "off"), (1, "int8")])  # int8: drafted, fp32 verifies
def test_continuations_equal_generate_on_100_prompts(fitted, reference, beam, draft):
    _, _, imported = fitted
    imported.draft = draft  # these models are too small for "auto" to draft
    eos = imported.tokenizer.eos_ids
    ended, different = 0, []
    with warnings.catch_warnings():  # the Llama 2's 32 trained positions: a warning past them, as tested elsewhere
        warnings.simplefilter("ignore", UserWarning)
        for prompt, ids, theirs in reference(beam):
            ours = imported.continue_ids(ids, NEW_TOKENS) if beam == 1 else imported.beam_ids(ids, beam, NEW_TOKENS)
            ended += bool(theirs) and theirs[-1] in eos
            if ours != theirs:
                different.append((prompt, ours, theirs))
    imported.draft = "auto"
    assert not different, different[:3]
    assert ended >= 80, ended  # fitted: it ends its continuations


def test_the_logit_lens_equals_transformers_hidden_states_on_fitted_weights(request, fitted):
    """Issue 61 on fitted weights (whose rows, unlike random ones, are peaked): each row's top-5 ids equal transformers'
    hidden states through its final norm and lm_head, the probabilities within 1e-4 (support/lens_check.py)."""
    model, tokenizer, imported = fitted
    family = request.node.callspec.params["fitted"]
    assert_lens_equals_hidden_states(family, model, tokenizer, imported, [f"{text} =" for text in sentences(3, 61)])


def test_patched_heads_equal_transformers_with_a_pre_hook_on_fitted_weights(fitted):
    """Issue 61 on fitted weights: `patched_logits` equals transformers with forward pre-hooks on the output
    projections within 1e-4 (support/patch_check.py)."""
    model, _, imported = fitted
    assert_patching_equals_pre_hooks(model, imported)
