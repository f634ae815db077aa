"""Activation patching of every head (Wang et al.'s IOI circuit, Meng et al.'s causal tracing): how much of the clean
answer's logit difference each head's output, patched from the clean run into the corrupted one, restores."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..kinds.language_model import LanguageModel, check_same_length, shared_prefix

Token = str | int
"""An answer token: its text as it follows the prompt (one token), or its id."""


@dataclass
class HeadPatching:
    """What patching each head from the clean run into the corrupted one does to the answer's logit difference.

    :ivar restored: ``(layers, heads)``: per head, (patched - corrupted) / (clean - corrupted) logit difference:
        0 = the corrupted run's, 1 = the clean run's
    :ivar clean_difference: logit(answer) - logit(wrong) of the clean run
    :ivar corrupted_difference: the same of the corrupted run
    :ivar answer: the clean answer's token id
    :ivar wrong: the wrong (corrupted) answer's token id
    :ivar clean_ids: the clean prompt's ids
    :ivar corrupted_ids: the corrupted prompt's ids (as many)
    """

    restored: np.ndarray
    clean_difference: float
    corrupted_difference: float
    answer: int
    wrong: int
    clean_ids: list[int]
    corrupted_ids: list[int]


def token_id(model: LanguageModel, token: Token, name: str) -> int:
    """The id of `token` (text that is one token where it follows a prompt, or an id); one line where it is not."""
    if isinstance(token, int) and not isinstance(token, bool):
        if not 0 <= token < model.config.vocab_size:
            raise ValueError(f"the {name} token id must be from 0 to {model.config.vocab_size - 1}, got {token}")
        return token
    if not isinstance(token, str):
        raise ValueError(f"the {name} token must be text or a token id, got {type(token).__name__}")
    ids = model.continuation_ids(token)
    if len(ids) != 1:
        raise ValueError(f"the {name} {token!r} is {len(ids)} tokens ({', '.join(map(repr, model.pieces(ids)))}): "
                         "a logit difference compares single tokens")
    return ids[0]


def answer_tokens(model: LanguageModel, clean: str, corrupted: str, answer: Token | None = None,
                  wrong: Token | None = None) -> tuple[int, int]:
    """The answer and wrong token ids; by default the clean run's top next token, and the corrupted run's top one
    other than the answer."""
    answer_id = int(model.head_outputs(model.encode(clean))[0].argmax()) if answer is None else \
        token_id(model, answer, "answer")
    if wrong is not None:
        return answer_id, token_id(model, wrong, "wrong answer")
    corrupted_logits = model.head_outputs(model.encode(corrupted))[0].clone()
    corrupted_logits[answer_id] = float("-inf")
    return answer_id, int(corrupted_logits.argmax())


def restored_by_head(model: LanguageModel, clean: str, corrupted: str, answer: Token, wrong: Token) -> HeadPatching:
    """`HeadPatching` of every head: the corrupted prompt run once per head (many heads a batch, one batch row per
    head) with that head's output from the clean run; one line for prompts of different token counts, answers that
    are not single tokens, or runs whose logit differences are equal (nothing to restore)."""
    clean_ids, corrupted_ids = model.encode(clean), model.encode(corrupted)
    check_same_length(corrupted_ids, clean_ids)
    answer_id, wrong_id = token_id(model, answer, "answer"), token_id(model, wrong, "wrong answer")
    if answer_id == wrong_id:
        raise ValueError("the answer and the wrong answer are the same token: a logit difference needs two")
    clean_logits, clean_outputs = model.head_outputs(clean_ids)
    corrupted_logits = model.head_outputs(corrupted_ids)[0]
    layers, heads = model.config.decoder_layers, model.num_heads
    every = [(layer, head) for layer in range(layers) for head in range(heads)]
    patched = model.patched_runs(corrupted_ids, clean_outputs, [[h] for h in every],
                                 shared_prefix(corrupted_ids, clean_ids))
    pair = torch.tensor([answer_id, wrong_id], device=patched.device)

    def difference(logits: torch.Tensor) -> torch.Tensor:
        chosen = logits.double()[..., pair]
        return chosen[..., 0] - chosen[..., 1]

    clean_difference, corrupted_difference = float(difference(clean_logits)), float(difference(corrupted_logits))
    span = clean_difference - corrupted_difference
    if abs(span) < 1e-6:
        raise ValueError(f"the clean and corrupted runs give the answer the same logit difference "
                         f"({clean_difference:.4f}): nothing for a head to restore; pick other prompts or tokens")
    restored = ((difference(patched) - corrupted_difference) / span).cpu().numpy().reshape(layers, heads)
    return HeadPatching(restored, clean_difference, corrupted_difference, answer_id, wrong_id, clean_ids,
                        corrupted_ids)

