"""The worker processes of `TranslationModel.worker_pool` never run the parent's main script (spawn would run it again
in each: an app script's side effects, its page code). The tiny random model on the CPU, fp32."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import os, sys
from pathlib import Path

Path(sys.argv[2], f"ran-{os.getpid()}").touch()  # a side effect of every process that runs this script

if __name__ == "__main__":
    import viz_model

    with viz_model.load(sys.argv[1], device="cpu").worker_pool(2) as pool:
        workers = {pool.submit(os.getpid).result() for _ in range(4)}
    restored = sys.modules["__main__"].__dict__ is globals()
    print(json.dumps({"parent": os.getpid(), "workers": sorted(workers), "restored": restored}))
""".replace("import os, sys", "import json, os, sys")


def test_workers_never_run_the_parent_s_main_script(random_model_dir, tmp_path):
    script, marks = tmp_path / "app_like.py", tmp_path / "marks"
    script.write_text(SCRIPT)
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), str(random_model_dir), str(marks)], capture_output=True,
                          text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["workers"] and report["parent"] not in report["workers"]
    assert sorted(p.name for p in marks.iterdir()) == [f"ran-{report['parent']}"]  # the parent's run only
    assert report["restored"]  # the parent's main module is its own again once the workers started
