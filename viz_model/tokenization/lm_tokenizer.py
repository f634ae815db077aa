"""The tokenizer of an imported decoder-only language model: its ``tokenizer.json`` as transformers 5 builds it (the
post-processor adds the BOS where the family does: Llama's ``<s>`` / ``<|begin_of_text|>``, none for GPT-2 or Qwen),
and ``lm_tokenizer.json``: the ids that end a continuation, the model's id table, the chat template."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .rules_tokenizer import RulesTokenizer
from .tokenizer_json import clean_up_spaces

RULES = "lm_tokenizer.json"
RULE_KEYS = ("ids", "eos", "clean_up_spaces", "chat_template", "special_tokens", "sampling", "generation")
OPTIONAL_RULES = {"generation": {}}  # what a model imported before the rule existed reads as
CHAT_ROLES = ("system", "user", "assistant", "tool")
MAX_MESSAGES = 200
NO_CHAT_TEMPLATE = "this model has no chat template (a base model): give it a prompt to continue instead"


class LMTokenizer(RulesTokenizer):
    """Text to a language model's ids and back, as transformers' tokenizer of its folder.

    :ivar rules: ``ids`` (the model's id table), ``eos`` (the ids that end a continuation), ``clean_up_spaces``,
        ``chat_template`` (the folder's Jinja chat template or None), ``special_tokens`` (the names the template
        reads, such as ``bos_token``, and their text), ``sampling`` (the folder's generation config samples),
        ``generation`` (the generation config's search settings `viz_model.search.causal.LMSearch` applies)
    :ivar eos_ids: the ids that end a continuation
    :ivar skipped: the special tokens' ids, left out of decoded text
    """

    FILES = ("tokenizer.json", RULES)
    WHAT = "an imported tokenizer"
    MARKER = RULES
    RULES = RULES
    RULE_KEYS = RULE_KEYS
    OPTIONAL_RULES = OPTIONAL_RULES

    def __init__(self, backend: Any, rules: dict[str, Any], files: dict[str, bytes], path: str | None = None) -> None:
        super().__init__(backend, rules, files, path)
        self.eos_ids: list[int] = list(rules["eos"])
        self.eos_id = self.eos_ids[0] if self.eos_ids else None

    def encode(self, text: str) -> list[int]:
        """The ids of `text` as transformers' ``tokenizer(text).input_ids`` gives them (BOS where the family adds
        one)."""
        return self.backend.encode(text, add_special_tokens=True).ids

    def continuation_ids(self, text: str) -> list[int]:
        """The ids of `text` as it follows a prompt: no special tokens added."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` with the special tokens left out (``decode(ids, skip_special_tokens=True)``)."""
        text = self.backend.decode([int(i) for i in ids], skip_special_tokens=True)
        return clean_up_spaces(text) if self.rules["clean_up_spaces"] else text

    def chat_text(self, messages: object) -> str:
        """`messages` rendered by the folder's chat template, the assistant's turn opened after them (as
        transformers' ``apply_chat_template(messages, add_generation_prompt=True, tokenize=False)``: its renderer,
        so transformers must be installed); one line where the model has no template or a message is malformed."""
        template = self.rules["chat_template"]
        if template is None:
            raise ValueError(NO_CHAT_TEMPLATE)
        check_messages(messages)
        try:
            from transformers.utils.chat_template_utils import render_jinja_template
        except ImportError:
            raise ValueError('chat needs transformers to render the template: pip install "viz-model[hf]"') from None
        rendered, _ = render_jinja_template(conversations=[messages], chat_template=template,
                                            add_generation_prompt=True, **self.rules["special_tokens"])
        return rendered[0]

    def chat_ids(self, messages: object) -> list[int]:
        """The ids of `chat_text`, tokenized with no special tokens added (the template wrote them)."""
        return self.backend.encode(self.chat_text(messages), add_special_tokens=False).ids


def check_messages(messages: object) -> None:
    """A list of {"role": one of CHAT_ROLES, "content": text}; else a one-line ValueError naming the fault."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    if len(messages) > MAX_MESSAGES:
        raise ValueError(f"{len(messages)} messages; the limit is {MAX_MESSAGES}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise ValueError(f"message {i} must be a dict with a text 'content', got {message!r:.80}")
        if message.get("role") not in CHAT_ROLES:
            raise ValueError(f"message {i} has role {message.get('role')!r}; the roles are {', '.join(CHAT_ROLES)}")
