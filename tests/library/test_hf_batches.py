"""The exactness tests' references (tests/support/hf_batches.py): a beam search over inputs of one length in one batch
gives each input the output and the score it gets alone, bit for bit, on a decoder-only and an encoder-decoder model,
and on the decoder-only one with rows of a batch that end at different steps."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

transformers = pytest.importorskip("transformers")
from support.hf import WORDS_EN, build_marian_folder, sentences  # noqa: E402
from support.hf_batches import by_length, generate_rows, up_to  # noqa: E402
from support.hf_lm import build_lm_folder  # noqa: E402

pytestmark = pytest.mark.slow
SETTINGS = {"do_sample": False, "max_new_tokens": 8}


@pytest.fixture(scope="module", params=["gpt2", "marian"])
def model(request, tmp_path_factory):
    return built(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """GPT-2 (its outputs differ by input where the Marian's are one and the same)."""
    return built("gpt2", tmp_path_factory)


def built(name: str, tmp_path_factory):
    """(transformers' model `name` from its own initialisation, whether it is decoder-only, the inputs: 24
    sentences' ids)."""
    root = tmp_path_factory.mktemp("hf")
    decoder_only = name == "gpt2"
    folder = build_lm_folder(root, "gpt2") if decoder_only else build_marian_folder(root)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(0)
    config = transformers.AutoConfig.from_pretrained(folder, attn_implementation="eager")
    model_class = transformers.GPT2LMHeadModel if decoder_only else transformers.MarianMTModel
    inputs = [tokenizer(text).input_ids for text in sentences(WORDS_EN, 24, 90)]
    assert max(map(len, by_length(inputs).values())) > 1  # some inputs share a batch
    return model_class(config).eval(), decoder_only, inputs


def generate(hf, ids: list[list[int]], decoder_only: bool, **settings):
    """``generate`` over `ids` (one length) as one batch, with its scores."""
    batch = torch.tensor(ids)
    masked = {"attention_mask": torch.ones_like(batch)} if decoder_only else {}
    with torch.no_grad():
        return hf.generate(batch, **masked, **settings, **SETTINGS, output_scores=True, return_dict_in_generate=True)


@pytest.mark.parametrize("beams", [4, 5])
def test_a_beam_search_batch_of_one_length_scores_each_input_as_alone(model, beams):
    hf, decoder_only, inputs = model
    for positions in by_length(inputs).values():
        together = generate(hf, [inputs[i] for i in positions], decoder_only, num_beams=beams)
        for row, i in enumerate(positions):
            alone = generate(hf, [inputs[i]], decoder_only, num_beams=beams)
            assert torch.equal(alone.sequences_scores[0], together.sequences_scores[row])
            width = alone.sequences.shape[1]
            assert torch.equal(alone.sequences[0], together.sequences[row, :width])


@pytest.mark.parametrize("beams", [1, 4])
def test_generate_rows_gives_each_input_its_output_alone(gpt2, beams):
    hf, decoder_only, inputs = gpt2
    starts = [len(ids) if decoder_only else 1 for ids in inputs]  # after the prompt, or the decoder's start token
    alone = [generate(hf, [ids], decoder_only, num_beams=beams).sequences[0].tolist() for ids in inputs]
    # an end that rows reach at different steps (the random weights never end): the commonest token generated
    end = Counter(token for start, row in zip(starts, alone) for token in row[start:]).most_common(1)[0][0]
    settings = {"num_beams": beams, "eos_token_id": end, "pad_token_id": end}
    alone = [up_to(generate(hf, [ids], decoder_only, **settings).sequences[0].tolist()[start:], (end,))
             for start, ids in zip(starts, inputs)]
    rows = generate_rows(hf, inputs, mask=decoder_only, **settings, **SETTINGS)
    assert [up_to(row[start:], (end,)) for start, row in zip(starts, rows)] == alone
    assert len({len(new) for new in alone}) > 1 and any(new[-1] == end for new in alone)  # some end before others
