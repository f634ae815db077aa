"""Safetensors files whose large tensors are holes: the header and the small tensors written, the rest skipped with a
seek, so a file with the size of an 8B model's shard costs (almost) no disk and reads as zeros. What the big-model
tests and benchmark open memory-mapped without the disk or the time random weights would take."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path

import torch

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
INDEX = "model.safetensors.index.json"


def write_sparse_safetensors(path: Path, shapes: Mapping[str, tuple[int, ...]], dtype: torch.dtype,
                             filled: Mapping[str, torch.Tensor] | None = None) -> int:
    """Write `path` holding a tensor of each shape of `shapes` (in `dtype`): those of `filled` written, every other
    one a hole (zeros); returns the file's size in bytes."""
    if dtype not in SAFETENSORS_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(map(str, SAFETENSORS_DTYPES))}, got {dtype}")
    filled = filled or {}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = math.prod(shape) * dtype.itemsize
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads its header to 8 bytes
    start = 8 + len(text)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, tensor in filled.items():
            begin = header[name]["data_offsets"][0]  # type: ignore[index]
            if tuple(tensor.shape) != tuple(shapes[name]):
                raise ValueError(f"{name}: shape {tuple(tensor.shape)}, but the file's is {tuple(shapes[name])}")
            f.seek(start + begin)
            f.write(tensor.to(dtype).contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        f.truncate(start + offset)
    return start + offset


def write_sparse_shards(folder: Path, shapes: Mapping[str, tuple[int, ...]], dtype: torch.dtype,
                        shard_bytes: int, filled: Mapping[str, torch.Tensor] | None = None) -> list[str]:
    """`shapes` written as sparse safetensors shards of about `shard_bytes` each with the index transformers writes
    (``model.safetensors.index.json``); returns the shards' names."""
    groups: list[dict[str, tuple[int, ...]]] = [{}]
    size = 0
    for name, shape in shapes.items():
        tensor_bytes = math.prod(shape) * dtype.itemsize
        if groups[-1] and size + tensor_bytes > shard_bytes:
            groups.append({})
            size = 0
        groups[-1][name] = shape
        size += tensor_bytes
    names = [f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
    total = 0
    for name, group in zip(names, groups):
        total += write_sparse_safetensors(folder / name, group, dtype,
                                          {k: v for k, v in (filled or {}).items() if k in group})
    weight_map = {tensor: name for name, group in zip(names, groups) for tensor in group}
    (folder / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return names


def disk_bytes(path: Path) -> int:
    """The bytes `path` takes on disk (its allocated blocks), as ``du`` counts them."""
    return path.stat().st_blocks * 512
