"""The recorded beam search of a language model (`causal_beam_tree`, CPU fp32, a tiny imported Llama): the tree's
best is what `LanguageModel.beam_ids` and greedy decoding find, and its red path spells it."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from support.hf_lm import build_lm_folder, import_lm  # noqa: E402

from viz_model.search.causal_tree import causal_beam_tree  # noqa: E402


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), "llama"), tmp_path_factory.mktemp("lm"))


@pytest.mark.parametrize("beam", [1, 3])
def test_the_tree_finds_what_the_search_finds_and_its_path_spells_it(llama, beam):
    ids = llama.encode("a man plays in the snow")
    tree = causal_beam_tree(llama.network, ids, beam, llama.search.length_penalty, 8, llama.tokenizer.eos_ids,
                            llama.search)
    assert tree.best.tokens == llama.beam_ids(ids, beam, 8)
    assert len(tree.chosen_path) == len(tree.best.tokens)
    assert [tree.steps[t].candidates[i].token for t, i in tree.chosen_path] == tree.best.tokens
    assert tree.rule == "transformers" and all(len(s.candidates) <= 2 * beam * beam for s in tree.steps)
    assert any(h.tokens == tree.best.tokens for h in tree.finished)


def test_an_empty_prompt_is_one_line(llama):
    with pytest.raises(ValueError, match="no tokens"):
        causal_beam_tree(llama.network, [], 2, 1.0, 4, llama.tokenizer.eos_ids)
