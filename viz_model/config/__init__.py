"""Configuration dataclasses, the only place where defaults live: the network (`ModelConfig`, saved in every model
directory), a training run (`TrainConfig`, with its `CorpusConfig` tables), and the checks both run on construction.
Each validates its values and rejects unknown keys when read from a file, so a typo fails loudly."""

from .checks import ConfigError, from_dict
from .model import MAX_CONFIG_BYTES, ModelConfig
from .training import HOLDOUT_SEED, CorpusConfig, TrainConfig, apply_override

__all__ = ["HOLDOUT_SEED", "MAX_CONFIG_BYTES", "ConfigError", "CorpusConfig", "ModelConfig", "TrainConfig",
           "apply_override", "from_dict"]
