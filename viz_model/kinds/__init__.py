"""The kinds of model, one module each, every one a `ModelKind`: a translator (`TranslationModel`, encoder-decoder)
and a language model (`LanguageModel`, decoder-only)."""
