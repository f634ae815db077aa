"""Training: data and batching, schedule, loss, the resumable loop, checkpoint averaging, evaluation."""
