"""The allocator setting a server of long traces runs with (CPU, Linux/glibc): with glibc's sliding mmap threshold
a freed layer-sized block stays in the process (its resident set keeps its peak); with `steady_allocator` it goes
back to the system when freed, which the soak (benchmarks/bench_soak.py) relies on. Each case in a fresh process."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys

import pytest

CASE = """
import json, sys
import numpy as np
from pathlib import Path
from viz_model.nn.devices import steady_allocator

def rss():
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024

steady = sys.argv[1] == "steady"
took = steady_allocator() if steady else None
big = np.ones(30 * 2**20 // 8); del big  # glibc's sliding threshold rises to 30 MB once this is freed
before = rss()
blocks = [np.ones(3 * 2**20 // 8) for _ in range(16)]  # 48 MB of 3 MB blocks: a trace's layers
held = rss()
del blocks
print(json.dumps({"took": took, "grew": held - before, "kept": rss() - before}))
"""


def freed(mode: str) -> dict:
    result = subprocess.run([sys.executable, "-c", CASE, mode], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc: Linux only")
def test_freed_blocks_go_back_to_the_system_only_with_the_steady_allocator():
    try:
        _ = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        pytest.skip("no glibc here")
    sliding, steady = freed("sliding"), freed("steady")
    assert sliding["grew"] > 40 and steady["grew"] > 40
    assert sliding["kept"] > 40, sliding  # glibc's own setting keeps the freed blocks in the heap
    assert steady["took"] is True and steady["kept"] < 10, steady
