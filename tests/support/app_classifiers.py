"""The app's maps-only encoders: a models folder holding a BERT and a DeBERTa-v3 sequence classifier (folders with no
masked-language-model head, built by transformers and imported; `build_classifier_assets`)."""

from __future__ import annotations

from pathlib import Path

from support.app_encoders import imported_into

CLASSIFIERS = {"bert-classifier": ("bert", "BertForSequenceClassification"),
               "deberta-v3-classifier": ("deberta-v3", "DebertaV2ForSequenceClassification")}


def build_classifier_folder(root: Path, name: str) -> Path:
    """``root/name``: the family's small masked LM (`build_encoder_folder`) saved again as a sequence classifier
    (its encoder kept, a new classification head, no masked-LM head) with its tokenizer; returns it."""
    import torch
    import transformers

    from support.hf_encoders import build_encoder_folder

    family, classifier_class = CLASSIFIERS[name]
    masked_lm = build_encoder_folder(root / "masked-lm", family)
    torch.manual_seed(1)
    classifier = getattr(transformers, classifier_class).from_pretrained(masked_lm)
    folder = root / name
    classifier.save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(masked_lm).save_pretrained(folder)
    return folder


def build_classifier_assets(root: Path) -> Path:
    """``root/bert-classifier`` and ``root/deberta-v3-classifier``, each imported from a classifier folder (skipped
    where already there); returns `root`."""
    return imported_into(root, CLASSIFIERS, build_classifier_folder)
