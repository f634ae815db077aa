"""Words on the pages: example sentences by domain, counts in words, Markdown escaping, confidence highlighting."""

from __future__ import annotations

import re

from viz_model.modeldir.coverage import WordConfidence, word_confidences
from viz_model.trace import AttentionTrace

# keys are `viz_model.modeldir.coverage.DOMAINS` values: matched against what a model was trained on
EXAMPLE_DOMAINS = {
    "image captions": (
        "Two young dogs are playing in the snow.",
        "A man in a blue shirt is riding a bike down the street.",
        "A little girl climbs into a wooden playhouse.",
        "Several people are standing in front of a large building.",
        "A woman is reading a book on the beach.",
    ),
    "everyday sentences": (
        "Where is the train station?",
        "I love you.",
        "Could you help me, please?",
        "We are going to the cinema tomorrow.",
        "My brother has lived in Berlin for ten years.",
    ),
}


EXAMPLES = tuple(sentence for group in EXAMPLE_DOMAINS.values() for sentence in group)
MASKED_EXAMPLES = (  # an encoder's fill-in-the-blank examples: {mask} is the model's mask token
    "Two young dogs are {mask} in the snow.",
    "A man in a blue shirt is riding a {mask} down the street.",
    "A woman is reading a {mask} on the beach.",
    "Where is the train {mask}?",
    "My brother has lived in {mask} for ten years.",
)


LOW_CONFIDENCE = 0.5  # output words below this probability are highlighted


VERY_LOW_CONFIDENCE = 0.2


# --- text --------------------------------------------------------------------------------------------------------
def count(n: int, noun: str, lead: str = "") -> str:
    """"1 head", "4 heads" (with `lead`: "Each of the 4 heads", or "The 1 head" for one)."""
    if n == 1:
        return f"{'The ' if lead else ''}1 {noun}"
    return f"{lead + ' ' if lead else ''}{n} {noun}s"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&\"'=^])")


def md_escape(text: str) -> str:
    """Text shown literally by st.markdown: every Markdown/HTML character backslash-escaped (CommonMark)."""
    return _MD_SPECIAL.sub(r"\\\1", text).replace("\n", "  \n")


def example_domain(sentence: str) -> str:
    return next(domain for domain, group in EXAMPLE_DOMAINS.items() if sentence in group)


def example_label(sentence: str, known: list[str] | None) -> str:
    """The example with its kind of text, and a warning when the current model was not trained on that kind."""
    domain = example_domain(sentence)
    outside = known is not None and domain not in known
    return f"{sentence} · {domain}" + (" (outside this model's training)" if outside else "")


def output_words(trace: AttentionTrace) -> list[WordConfidence]:
    """The translation's words (pieces merged, ``</s>`` left out), each with its least likely piece's probability."""
    words = word_confidences(trace.output_tokens, [step.probability for step in trace.steps])
    return [w for w in words if w.text and w.text != "</s>"]


def confidence_markdown(words: list[WordConfidence]) -> str:
    """The words as Markdown, each highlighted by its probability (below LOW / VERY_LOW_CONFIDENCE)."""
    out = []
    for word in words:
        text = md_escape(word.text)
        if word.probability < VERY_LOW_CONFIDENCE:
            text = f":red-background[{text}]"
        elif word.probability < LOW_CONFIDENCE:
            text = f":orange-background[{text}]"
        out.append(text)
    return " ".join(out)
