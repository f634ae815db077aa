"""viz_model: an instrumented "Attention Is All You Need" translator that records everything it computes.

    import viz_model
    model = viz_model.load()                     # the shipped default model
    trace = model.trace("Two dogs are playing in the snow.", beam=4)
    trace.encoder_attentions[0]                  # numpy (heads, src_len, src_len)
"""

__version__ = "0.2.0"  # the one place the version is set (pyproject.toml reads it)

from .api import from_transformers, load
from .config import ConfigError, ModelConfig, TrainConfig
from .kinds.encoder import EncoderModel
from .kinds.language_model import LanguageModel
from .kinds.translator import TranslationModel
from .modeldir.checkpoint import CheckpointError
from .modeldir.shipped import DEFAULT_MODEL, available_models
from .nn.model import HeadMask, Transformer
from .tokenization.tokenizer import Tokenizer, TokenizerError
from .trace import AttentionTrace, DecodingStep, TraceError

__all__ = ["AttentionTrace", "CheckpointError", "ConfigError", "DEFAULT_MODEL", "DecodingStep", "EncoderModel",
           "HeadMask", "LanguageModel", "ModelConfig", "Tokenizer", "TokenizerError", "TraceError", "TrainConfig",
           "Transformer", "TranslationModel", "available_models", "from_transformers", "load"]
