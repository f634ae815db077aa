"""`LogitLens`: what the logit lens read from a residual stream (each row's top tokens, chosen tokens' ranks and
probabilities through the rows); `read_lens` fills it from the states and the model's own unembedding."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

POSITIONS_AT_ONCE = 64  # positions unembedded at a time: no (positions, vocabulary) block larger than this is held


@dataclass
class LogitLens:
    """The residual stream of one text read through the model's final norm and unembedding, row by row.

    Row 0 reads the embeddings (with what the model adds before block 0), row i the stream after block i; the last
    row is the model's own output. Position t reads the text's token t and scores the token after it.

    :ivar ids: the ids read, one a position
    :ivar tokens: their pieces
    :ivar top_ids: ``(rows, positions, k)`` each row's k most likely next tokens, most likely first
    :ivar top_probs: ``(rows, positions, k)`` their probabilities
    :ivar top_tokens: ``[row][position][k]`` their pieces
    :ivar top_curves: ``(rows, positions, rows)`` the probability of cell (row, position)'s top token at every row
    :ivar tracked_ids: the tokens followed through the rows at every position
    :ivar tracked_probs: ``(rows, positions, len(tracked_ids))`` their probabilities
    :ivar tracked_ranks: ``(rows, positions, len(tracked_ids))`` their ranks (1: the most likely token)
    """

    ids: list[int]
    tokens: list[str]
    top_ids: np.ndarray
    top_probs: np.ndarray
    top_tokens: list[list[list[str]]]
    top_curves: np.ndarray
    tracked_ids: list[int]
    tracked_probs: np.ndarray
    tracked_ranks: np.ndarray

    @property
    def num_rows(self) -> int:
        """Blocks + 1: the embeddings' row, then one after each block."""
        return int(self.top_ids.shape[0])

    def row_label(self, row: int) -> str:
        """"embeddings" for row 0, "block i" for row i."""
        return "embeddings" if row == 0 else f"block {row}"

    def token_curve(self, token: int, position: int) -> tuple[np.ndarray, np.ndarray]:
        """``(rows,)`` the probability and the rank of tracked `token` at `position`, row by row; one line where it
        was not tracked or the position is outside the text."""
        if token not in self.tracked_ids:
            raise ValueError(f"token id {token} was not tracked; pass it in track to logit_lens")
        self._check_cell(0, position)
        column = self.tracked_ids.index(token)
        return self.tracked_probs[:, position, column], self.tracked_ranks[:, position, column]

    def deciding_block(self, row: int, position: int) -> int:
        """The block (1-based) whose output changed the probability of cell (row, position)'s top token most."""
        self._check_cell(row, position)
        curve = self.top_curves[row, position]
        return int(np.abs(np.diff(curve)).argmax()) + 1

    def window(self, start: int, stop: int) -> LogitLens:
        """The lens of positions ``start..stop - 1`` alone (a long text's last ones, as a grid draws them)."""
        cut = slice(start, stop)
        return replace(self, ids=self.ids[cut], tokens=self.tokens[cut], top_ids=self.top_ids[:, cut],
                       top_probs=self.top_probs[:, cut], top_tokens=[row[cut] for row in self.top_tokens],
                       top_curves=self.top_curves[:, cut], tracked_probs=self.tracked_probs[:, cut],
                       tracked_ranks=self.tracked_ranks[:, cut])

    def _check_cell(self, row: int, position: int) -> None:
        rows, positions = self.top_ids.shape[:2]
        for name, value, count in (("row", row, rows), ("position", position, positions)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < count:
                raise ValueError(f"{name} must be an integer from 0 to {count - 1}, got {value!r}")


def _unembedded(states: Sequence[Tensor], unembed: Callable[[Tensor], Tensor]):
    """Per row and block of positions: (row, first position, ``(positions, vocabulary)`` float32 logits)."""
    for row, state in enumerate(states):
        for start in range(0, state.shape[1], POSITIONS_AT_ONCE):
            yield row, start, unembed(state[0, start:start + POSITIONS_AT_ONCE]).float()


def read_lens(ids: Sequence[int], states: Sequence[Tensor], unembed: Callable[[Tensor], Tensor], top_k: int,
              track: Sequence[int], pieces: Callable[[list[int]], list[str]]) -> LogitLens:
    """The lens of `states` (per row ``(1, positions, d_model)``) read through `unembed` (the model's final norm and
    output projection): top `top_k` tokens in a first pass, then the probability and rank of each cell's top token
    and of `track`'s tokens at every row in a second."""
    rows, n = len(states), len(ids)
    top_ids = np.zeros((rows, n, top_k), dtype=np.int64)
    top_probs = np.zeros((rows, n, top_k), dtype=np.float32)
    for row, start, logits in _unembedded(states, unembed):
        top = torch.softmax(logits, dim=-1).topk(top_k, dim=-1)
        top_ids[row, start:start + len(logits)] = top.indices.cpu().numpy()
        top_probs[row, start:start + len(logits)] = top.values.cpu().numpy()
    followed = np.concatenate([top_ids[:, :, 0].T, np.tile(np.asarray(track, dtype=np.int64), (n, 1))], axis=1)
    probs = np.zeros((rows, n, followed.shape[1]), dtype=np.float32)
    ranks = np.zeros((rows, n, len(track)), dtype=np.int64)
    for row, start, logits in _unembedded(states, unembed):
        index = torch.as_tensor(followed[start:start + len(logits)], device=logits.device)
        chosen = logits.gather(1, index)
        probs[row, start:start + len(logits)] = torch.exp(
            chosen - torch.logsumexp(logits, dim=-1, keepdim=True)).cpu().numpy()
        tracked = chosen[:, rows:, None]  # a rank counts the tokens scored above it: tracked tokens' alone
        ranks[row, start:start + len(logits)] = ((logits[:, None, :] > tracked).sum(-1) + 1).cpu().numpy()
    return LogitLens(list(ids), pieces(list(ids)), top_ids, top_probs,
                     [[pieces(cell.tolist()) for cell in row] for row in top_ids],
                     probs[:, :, :rows].transpose(2, 1, 0).copy(), list(track), probs[:, :, rows:].copy(), ranks)


def check_lens(top_k: object, track: object, vocabulary: int) -> tuple[int, list[int]]:
    """`top_k` and `track` (token ids to follow) when they fit a vocabulary of `vocabulary`; else a one-line
    ValueError."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= vocabulary:
        raise ValueError(f"top_k must be an integer from 1 to {vocabulary} (the vocabulary's size), got {top_k!r}")
    tokens = list(track) if isinstance(track, (list, tuple)) else None
    if tokens is None or any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocabulary
                             for t in tokens):
        raise ValueError(f"track must be a list of token ids from 0 to {vocabulary - 1}, got {track!r}")
    return top_k, tokens
