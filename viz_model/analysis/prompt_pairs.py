"""Shipped clean / corrupted prompt pairs for head patching: one word changed, so that the two runs differ in the
answer (a tokenizer may still split them into different counts: `fitting` keeps the pairs it gives as many tokens,
and patching a pair that does not fit says so in one line)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PromptPair:
    """A clean prompt, its corrupted twin and what the change asks of the model.

    :ivar key: its short name (a page setting's value)
    :ivar label: what a picker shows
    :ivar clean: the prompt whose run the heads' outputs are copied from
    :ivar corrupted: the prompt run with them patched in
    """

    key: str
    label: str
    clean: str
    corrupted: str


PROMPT_PAIRS = (
    PromptPair("scene", "A scene: dogs or girls playing in the …", "Two dogs are playing in the",
               "Two girls are playing in the"),
    PromptPair("capital", "A capital: France or Italy", "The capital of France is", "The capital of Italy is"),
    PromptPair("names", "Who gets the drink (indirect object)", "When Mary and John went to the store, John gave a "
               "drink to", "When Mary and John went to the store, Mary gave a drink to"),
    PromptPair("instrument", "An instrument: plays or sings the …", "A man is playing the guitar while a woman "
               "plays the", "A man is playing the guitar while a woman sings the"),
)
BY_KEY = {pair.key: pair for pair in PROMPT_PAIRS}


def fitting(count: Callable[[str], int]) -> list[PromptPair]:
    """The shipped pairs whose clean and corrupted prompts have one token count under `count` (a tokenizer's)."""
    return [pair for pair in PROMPT_PAIRS if count(pair.clean) == count(pair.corrupted)]
