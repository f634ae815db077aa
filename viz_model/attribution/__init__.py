"""Beyond raw attention: what each source token and each target-prefix token contributed to every output token.

    import viz_model
    from viz_model.attribution import attribute
    result = attribute(viz_model.load(), "Two dogs play in the snow.")
    result.source_share()            # per output token: the share of the prediction that comes from the source
    result.source_scores("alti")     # (outputs, source tokens)

Methods (each gives, per output token, a score for every source token; the contribution and gradient methods score
the target prefix too):

- ``attention_mean`` and ``attention_layerN``: cross-attention weights (heads averaged; all layers, or layer N);
- ``rollout``: the last layer's cross-attention through the encoder's attention rollout (Abnar & Zuidema, 2020);
- ``value_weighted``: cross-attention weighted by the norm of the transformed value vectors (Kobayashi et al.,
  2020), heads and layers averaged;
- ``alti``: ALTI+ (Ferrando et al., 2022), see `contributions`;
- ``saliency``, ``input_x_gradient``, ``integrated_gradients``: see `gradients`.

A `viz_model.LanguageModel`: `attribute(model, prompt)` attributes each token of its continuation to the prompt's
tokens and the continuation's earlier ones (value_weighted, alti, the gradient methods; the cross-attention methods
refuse in one line). A `viz_model.EncoderModel`: `attribute(model, text)` attributes the prediction at each mask
token to the text's tokens (`fill_mask_scoring`).

`faithfulness.deletion_scores` checks which ranking the prediction really depends on. Modules: `record` (the
`Attribution` and its files), `scoring` (`attribute`, `attribute_ids`), `contributions`, `gradients`, `faithfulness`,
`corpus_scores` (faithfulness over a corpus), `method_aer` (each method's word-alignment error).
"""

from . import fill_mask_scoring  # noqa: F401  (registers the encoder's `attribute`)
from .gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE
from .record import FORMAT_VERSION, Attribution, AttributionError
from .scoring import (
    CONTRIBUTION_METHODS,
    DEFAULT_METHODS,
    LANGUAGE_MODEL_DEFAULTS,
    METHODS,
    attribute,
    attribute_continuation,
    attribute_ids,
    check_methods,
)

__all__ = ["CONTRIBUTION_METHODS", "DEFAULT_METHODS", "DEFAULT_STEPS", "DEFAULT_TOLERANCE", "FORMAT_VERSION",
           "LANGUAGE_MODEL_DEFAULTS", "METHODS", "Attribution", "AttributionError", "attribute",
           "attribute_continuation", "attribute_ids", "check_methods"]
