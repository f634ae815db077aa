"""Running `viz-model` in-process and checking its one-line user errors."""

from __future__ import annotations

from viz_model.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(capsys, argv: list, *fragments: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("viz-model: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert out == ""
    return lines[0]
