"""The training recipe's formulas as pure functions: the learning-rate schedule with its cooldown, and the
label-smoothed loss. The trainer calls them every step; the teaching pages draw them without a model or a run."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import ModelConfig, TrainConfig


def schedule_config(d_model: int, warmup_steps: int, lr_scale: float = 1.0, lr_peak: float = 0.0, epochs: int = 1,
                    cooldown_epochs: int = 0) -> TrainConfig:
    """A TrainConfig carrying only what the schedule reads (d_model, warm-up, scale or peak, the run's epochs and
    cooldown), to draw a schedule without a run; an impossible one is a `ConfigError`."""
    return TrainConfig(model=ModelConfig(d_model=d_model, heads=1, d_ff=1, vocab_size=8), warmup_steps=warmup_steps,
                       lr_scale=lr_scale, lr_peak=lr_peak, epochs=epochs, cooldown_epochs=cooldown_epochs)


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """The paper's schedule ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (times lr_scale).

    With ``lr_peak > 0`` the same shape is rescaled so that the peak (at step = warmup) equals lr_peak.
    """
    step = max(step, 1)
    shape = min(step ** -0.5, step * cfg.warmup_steps ** -1.5)
    if cfg.lr_peak > 0:
        return cfg.lr_peak * shape * math.sqrt(cfg.warmup_steps)
    return cfg.lr_scale * cfg.model.d_model ** -0.5 * shape


def cooldown_factor(epoch: int, batch_index: int, epoch_steps: int, cfg: TrainConfig) -> float:
    """What the learning rate of step `batch_index` of 0-based `epoch` (`epoch_steps` steps) is multiplied by: 1, and
    over the last `cooldown_epochs` epochs a linear decay that reaches zero at the end of the run. Epochs may differ
    in size (fractional corpus weights), so each cooldown epoch takes an equal share of the decay; the factor depends
    only on the position in the data, which a resume restores."""
    window = cooldown_window(cfg)
    if window is None or epoch < window[0]:
        return 1.0
    return 1.0 - (epoch - window[0] + batch_index / max(epoch_steps, 1)) / cfg.cooldown_epochs


def cooldown_window(cfg: TrainConfig) -> tuple[int, int] | None:
    """The 0-based epochs ``[start, end)`` of the learning-rate cooldown, or None without one."""
    return (cfg.epochs - cfg.cooldown_epochs, cfg.epochs) if cfg.cooldown_epochs else None


def label_smoothed_loss(logits: torch.Tensor, targets: torch.Tensor, smoothing: float
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, nll)`` summed over rows: ``loss = (1 - eps) * nll + eps * mean_v(-log p_v)`` (Szegedy et al., 2016).

    `logits` ``(rows, vocab)``, `targets` ``(rows,)`` ids; one log-softmax (in float32) serves both sums; the
    returned NLL is detached (it is reported, not trained on)."""
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(f"logits must be (rows, vocab) and targets (rows,); got {tuple(logits.shape)} and "
                         f"{tuple(targets.shape)}")
    log_probs = F.log_softmax(logits.float(), dim=-1)
    nll = -log_probs.gather(1, targets[:, None]).sum()
    if smoothing == 0:
        return nll, nll.detach()
    smooth = -log_probs.mean(dim=-1).sum()
    return (1 - smoothing) * nll + smoothing * smooth, nll.detach()
