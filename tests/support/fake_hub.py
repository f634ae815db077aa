"""The hub replaced by local folders, one per revision (no network): huggingface_hub's snapshot_download hands back
the folder of the revision asked for, and answers a revision it does not have as the hub does (404, revision not
found)."""

from __future__ import annotations

from pathlib import Path


def fake_revisions(monkeypatch, revisions: dict[str, Path]) -> list[str | None]:
    """Replace the hub's download by `revisions` (``main`` for none asked); returns the revisions asked for."""
    import huggingface_hub
    import requests
    from huggingface_hub.errors import RevisionNotFoundError

    asked: list[str | None] = []

    def download(repo_id, revision=None, **kwargs):
        asked.append(revision)
        if revision is not None and revision not in revisions:
            response = requests.Response()
            response.status_code = 404
            raise RevisionNotFoundError(f"404 Client Error: Revision Not Found for {repo_id}@{revision}",
                                        response=response)
        return str(revisions[revision or "main"])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    return asked
