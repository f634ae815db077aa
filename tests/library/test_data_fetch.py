"""`viz-model data fetch` / `list` against an HTTP server on loopback (127.0.0.1, a port the kernel picks) that
serves fixture files: verified files are written, a wrong checksum, a cut-off download, an HTTP error and an
unreachable server each give one line and exit 2 and leave no file behind. No test touches the internet."""

from __future__ import annotations

import gzip
import hashlib
import io
import socket
import tarfile
import threading
import zipfile
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from viz_model.cli.main import main
from viz_model.config.data_root import data_root
from viz_model.data import catalogue
from viz_model.data.catalogue import DataSet, Download, sgm_segments, tatoeba_pairs, wmt14_newstest
from viz_model.data.fetch import text_sha256

LOCAL = data_root()  # the local copy where tests/conftest.py found one


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gz(text: str) -> bytes:
    return gzip.compress(text.encode("utf-8"), mtime=0)


class Server:
    """Fixture files by URL path; `cut` paths announce more bytes than they send, then close the connection;
    `midway` paths call their function when half the body is sent."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut: set[str] = set()
        self.midway: dict[str, Callable[[], None]] = {}
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.requests.append(self.path)
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) + (1000 if self.path in outer.cut else 0)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                if self.path in outer.midway:
                    outer.midway.pop(self.path)()
                if self.path not in outer.cut:
                    self.wfile.write(body[len(body) // 2:])
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on (the kernel's port, released again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


CAPTIONS = {"train.en.gz": gz("A dog runs.\nTwo men talk.\n"),
            "train.de.gz": gz("Ein Hund rennt.\nZwei Männer reden.\n")}


def captions_set() -> DataSet:
    """A Multi30K-shaped set whose downloads are its files (checked by their published bytes and their text)."""
    return DataSet(name="multi30k", folder="multi30k", title="captions", licence="LICENCE-TEXT",
                   citation="CITATION-TEXT", made="as published",
                   downloads=tuple(Download(f"https://example.invalid/raw/{n}", n, sha(b))
                                   for n, b in CAPTIONS.items()),
                   files={n: sha(gzip.decompress(b)) for n, b in CAPTIONS.items()})


def anki_zip(rows: list[str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("deu.txt", "".join(row + "\n" for row in rows))
        z.writestr("_about.txt", "about")
    return out.getvalue()


ROWS = ["Hi.\tHallo!\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)", "Run!\tLauf!\tCC-BY 2.0"]


def pairs_set() -> DataSet:
    """A Tatoeba-shaped set: its files are made from an archive whose own checksum is not recorded."""
    return DataSet(name="tatoeba", folder="tatoeba", title="pairs", licence="CC-BY 2.0", citation="Tatoeba",
                   made="split", downloads=(Download("https://example.invalid/deu-eng.zip", "deu-eng.zip"),),
                   files={"pairs.en.gz": sha(b"Hi.\nRun!\n"), "pairs.de.gz": sha(b"Hallo!\nLauf!\n")},
                   convert=tatoeba_pairs)


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(["data", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_fetch_writes_verified_files_prints_licence_and_keeps_them(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 0, err
    assert leftovers(tmp_path / "multi30k") == ["train.de.gz", "train.en.gz"]  # no temporary file left
    for name, body in CAPTIONS.items():
        assert (tmp_path / "multi30k" / name).read_bytes() == body  # as published
    assert "licence: LICENCE-TEXT" in out and "cite: CITATION-TEXT" in out and f"VIZ_MODEL_DATA={tmp_path}" in out
    assert f"downloading {server.url}/multi30k/train.en.gz" in err
    asked = len(server.requests)
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 0 and len(server.requests) == asked and "(2 were there already)" in err  # nothing fetched again
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path))
    code, out, err = run(capsys, "list")
    assert code == 0 and f"data root: {tmp_path} ($VIZ_MODEL_DATA)" in out
    assert "multi30k (multi30k/, verified)" in out and "tatoeba (tatoeba/, not fetched)" in out


def test_the_default_place_is_the_data_root(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path / "root"))
    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    code, out, err = run(capsys, "fetch", "multi30k", "--mirror", server.url)
    assert code == 0, err
    assert leftovers(tmp_path / "root" / "multi30k") == ["train.de.gz", "train.en.gz"]
    assert "VIZ_MODEL_DATA=" not in out  # already where the configs look


def test_a_wrong_checksum_leaves_nothing_and_says_so_in_one_line(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    server.files["/multi30k/train.de.gz"] = gz("Ein Hund rennt.\nZwei Frauen reden.\n")  # another version
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 2
    error = [line for line in err.splitlines() if line.startswith("viz-model: error:")]
    assert len(error) == 1 and err.strip().endswith(error[0])
    assert f"{server.url}/multi30k/train.de.gz has SHA-256" in error[0] and "nothing was kept" in error[0]
    assert leftovers(tmp_path / "multi30k") == ["train.en.gz"]  # the verified one stays; no .part file


def test_a_cut_off_download_leaves_nothing_and_says_so_in_one_line(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    server.cut = {"/multi30k/train.en.gz"}
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 2
    size = len(CAPTIONS["train.en.gz"])
    assert err.strip().splitlines()[-1] == (
        f"viz-model: error: the download of {server.url}/multi30k/train.en.gz was cut off after {size // 2:,} of "
        f"{size + 1000:,} bytes; nothing was kept (run the command again)")
    assert leftovers(tmp_path / "multi30k") == []


def test_an_http_error_is_one_line(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 2 and err.strip() == (
        f"viz-model: error: {server.url}/multi30k/train.en.gz: HTTP 404 Not Found; nothing was kept")
    assert leftovers(tmp_path / "multi30k") == []


def test_offline_it_names_the_urls_and_the_folder_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    url = closed_port_url()
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", url)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"viz-model: error: cannot reach {url[7:]} (")
    assert (f"download the 2 files train.en.gz train.de.gz from {url}/multi30k/ into {tmp_path / 'multi30k'} and "
            "run `viz-model data fetch multi30k` again") in err
    assert leftovers(tmp_path / "multi30k") == []
    monkeypatch.setitem(catalogue.DATA_SETS, "tatoeba", pairs_set())
    code, out, err = run(capsys, "fetch", "tatoeba", "--to", tmp_path, "--mirror", url)
    assert code == 2 and f"download {url}/tatoeba/deu-eng.zip into {tmp_path / 'tatoeba'} and run" in err


def test_a_converted_set_is_checked_after_conversion(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "tatoeba", pairs_set())
    server.files = {"/tatoeba/deu-eng.zip": anki_zip(["Hi.\tHallo!\tx", "Run!\tRenn!\tx"])}  # another export
    code, out, err = run(capsys, "fetch", "tatoeba", "--to", tmp_path, "--mirror", server.url)
    assert code == 2 and "pairs.en.gz" not in err  # English matches; German does not
    assert "pairs.de.gz made from deu-eng.zip has SHA-256" in err and "nothing was kept" in err
    assert leftovers(tmp_path / "tatoeba") == []  # neither output nor the downloaded archive
    server.files = {"/tatoeba/deu-eng.zip": anki_zip(ROWS)}
    code, out, err = run(capsys, "fetch", "tatoeba", "--to", tmp_path, "--mirror", server.url)
    assert code == 0, err
    assert leftovers(tmp_path / "tatoeba") == ["pairs.de.gz", "pairs.en.gz"]
    assert gzip.decompress((tmp_path / "tatoeba" / "pairs.de.gz").read_bytes()) == b"Hallo!\nLauf!\n"
    first = (tmp_path / "tatoeba" / "pairs.en.gz").read_bytes()
    (tmp_path / "tatoeba" / "pairs.en.gz").unlink()
    assert run(capsys, "fetch", "tatoeba", "--to", tmp_path, "--mirror", server.url)[0] == 0
    assert (tmp_path / "tatoeba" / "pairs.en.gz").read_bytes() == first  # the same bytes every time


def test_an_archive_put_there_by_hand_is_used_offline(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(catalogue.DATA_SETS, "tatoeba", pairs_set())
    (tmp_path / "tatoeba").mkdir()
    (tmp_path / "tatoeba" / "deu-eng.zip").write_bytes(anki_zip(ROWS))
    code, out, err = run(capsys, "fetch", "tatoeba", "--to", tmp_path, "--mirror", closed_port_url())
    assert code == 0, err
    assert leftovers(tmp_path / "tatoeba") == ["deu-eng.zip", "pairs.de.gz", "pairs.en.gz"]


def test_a_file_there_that_differs_is_refused_not_overwritten(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    (tmp_path / "multi30k").mkdir()
    (tmp_path / "multi30k" / "train.en.gz").write_bytes(gz("edited\n"))
    (tmp_path / "multi30k" / ".train.de.gz.abc.part").write_bytes(b"left by a killed fetch")
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 2 and "train.en.gz is there but is not the recorded file" in err and server.requests == []
    assert leftovers(tmp_path / "multi30k") == ["train.en.gz"]  # the stale temporary file is gone, the edit kept


def test_unknown_data_set_and_bad_folder_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["data", "fetch", "europarl"])
    assert "invalid choice: 'europarl'" in capsys.readouterr().err
    assert run(capsys, "fetch", "wmt14", "--to", tmp_path, "--mirror", "mirror.example/data") == (
        2, "", "viz-model: error: --mirror must be an http:// or https:// URL, got 'mirror.example/data'\n")
    assert not (tmp_path / "wmt").exists()
    (tmp_path / "file").write_text("x")
    code, out, err = run(capsys, "fetch", "wmt14", "--to", tmp_path / "file")
    assert code == 2 and err.startswith(f"viz-model: error: cannot create {tmp_path / 'file' / 'wmt'}")


def test_sgm_segments_read_as_sacrebleu_reads_them():
    sgm = ('<srcset setid="newstest2014" srclang="any">\n<doc docid="1" genre="news" origlang="de">\n'
           '<seg id="1">Standard & Poor\'s  says\thello </seg>\n<p>\n<seg id="2"> Two</seg>\n</doc>\n</srcset>\n')
    assert sgm_segments(sgm) == ["Standard & Poor's says hello", "Two"]


def sgm(lines: list[str], kind: str) -> bytes:
    segs = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
    return (f'<{kind} setid="newstest2014" srclang="any" trglang="de">\n<doc sysid="ref" docid="d" genre="news" '
            f'origlang="de">\n{segs}</doc>\n</{kind}>\n').encode()


def wmt_archive(en: list[str], de: list[str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for member, body in ((catalogue.WMT14_MEMBERS["newstest2014.en.gz"], sgm(en, "srcset")),
                             (catalogue.WMT14_MEMBERS["newstest2014.de.gz"], sgm(de, "refset"))):
            info = tarfile.TarInfo(member)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def test_wmt_archive_conversion_and_a_damaged_archive(tmp_path):
    (tmp_path / "test-full.tgz").write_bytes(wmt_archive(["A b.", "C"], ["D e.", "F"]))
    assert wmt14_newstest({"test-full.tgz": tmp_path / "test-full.tgz"}) == {
        "newstest2014.en.gz": ["A b.", "C"], "newstest2014.de.gz": ["D e.", "F"]}
    (tmp_path / "test-full.tgz").write_bytes(b"not an archive")
    with pytest.raises(catalogue.CatalogueError, match="test-full.tgz: not the WMT14 test archive"):
        wmt14_newstest({"test-full.tgz": tmp_path / "test-full.tgz"})


def test_the_catalogue_names_every_folder_the_configs_read():
    assert {s.folder for s in catalogue.DATA_SETS.values()} == {"multi30k", "tatoeba", "wmt"}
    for data in catalogue.DATA_SETS.values():
        assert data.files and all(len(h) == 64 for h in data.files.values()) and data.licence and data.citation
        assert all(d.url.startswith("https://") for d in data.downloads)


# --- the real catalogue, served from the local copy -------------------------------------------------------------
needs_local_copy = pytest.mark.skipif(not (LOCAL / "multi30k" / "train.en.gz").is_file() or not
                                      (LOCAL / "tatoeba").is_dir() or not (LOCAL / "wmt").is_dir(),
                                      reason="needs the local copy of the corpora (../shared/data)")


def lines_of(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:-1]


@needs_local_copy
@pytest.mark.slow
def test_the_real_catalogue_fetches_what_the_configs_read(tmp_path, capsys, server):
    """Multi30K as published; Tatoeba and newstest2014 rebuilt in their published formats (an Anki zip with a third
    column, WMT's .sgm in a .tgz) from the local copy: each conversion must give the recorded text exactly."""
    for name in catalogue.DATA_SETS["multi30k"].files:
        server.files[f"/multi30k/{name}"] = (LOCAL / "multi30k" / name).read_bytes()
    en, de = lines_of(LOCAL / "tatoeba" / "pairs.en.gz"), lines_of(LOCAL / "tatoeba" / "pairs.de.gz")
    server.files["/tatoeba/deu-eng.zip"] = anki_zip([f"{e}\t{d}\tCC-BY 2.0 (France)" for e, d in zip(en, de)])
    server.files["/wmt/test-full.tgz"] = wmt_archive(lines_of(LOCAL / "wmt" / "newstest2014.en.gz"),
                                                     lines_of(LOCAL / "wmt" / "newstest2014.de.gz"))
    code, out, err = run(capsys, "fetch", "multi30k", "tatoeba", "wmt14", "--to", tmp_path, "--mirror", server.url)
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("licence: ")] == [
        f"licence: {data.licence}" for data in catalogue.DATA_SETS.values()]
    for data in catalogue.DATA_SETS.values():
        folder = tmp_path / data.folder
        assert leftovers(folder) == sorted(data.files)
        for name, text in data.files.items():
            assert text_sha256(folder / name) == text == text_sha256(LOCAL / data.folder / name)
    for name in catalogue.DATA_SETS["multi30k"].files:  # byte for byte as published
        assert (tmp_path / "multi30k" / name).read_bytes() == (LOCAL / "multi30k" / name).read_bytes()


def test_the_recorded_checksums_are_the_local_copy(tmp_path):
    if not LOCAL.is_dir():
        pytest.skip("needs the local copy of the corpora (../shared/data)")
    for data in catalogue.DATA_SETS.values():
        for name, text in data.files.items():
            assert text_sha256(LOCAL / data.folder / name) == text, f"{data.folder}/{name}"
    for d in catalogue.DATA_SETS["multi30k"].downloads:
        assert sha((LOCAL / "multi30k" / d.file).read_bytes()) == d.sha256


def test_a_set_with_no_convert_and_no_recorded_download_sum_still_checks_the_text(tmp_path, capsys, monkeypatch,
                                                                                  server):
    loose = captions_set()
    loose = replace(loose, downloads=tuple(replace(d, sha256="") for d in loose.downloads))
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", loose)
    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    server.files["/multi30k/train.de.gz"] = gz("anders\n")
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 2 and "is not the recorded text of train.de.gz; nothing was kept" in err
    assert leftovers(tmp_path / "multi30k") == ["train.en.gz"]


def test_a_second_fetch_of_a_set_being_fetched_is_refused_and_leaves_the_first_whole(tmp_path, capsys, monkeypatch,
                                                                                     server):
    """The second starts while the first's first file is downloading (it used to remove the first's temporary
    files as a killed fetch's, and the first then failed on its own vanished file)."""
    from viz_model.data.fetch import FetchError, fetch

    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    second: list[str] = []

    def fetch_again() -> None:
        try:
            fetch(captions_set(), tmp_path, server.url, say=lambda line: None)
            second.append("ran")
        except FetchError as err:
            second.append(str(err))

    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    server.midway["/multi30k/train.en.gz"] = fetch_again
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 0, err
    assert second[0] == (f"another `viz-model data fetch` is writing {tmp_path / 'multi30k'}; let it finish, then "
                         "run the command again")
    assert leftovers(tmp_path / "multi30k") == ["train.de.gz", "train.en.gz"]
    assert not [p for p in tmp_path.rglob("*.part")]


def test_a_relative_to_is_said_as_the_absolute_root_the_configs_need(tmp_path, capsys, monkeypatch, server):
    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "fetch", "multi30k", "--to", "corpora", "--mirror", server.url)
    assert code == 0, err
    assert f"multi30k is in {tmp_path / 'corpora' / 'multi30k'}\n" in out  # training runs from elsewhere too
    assert out.endswith(f"with VIZ_MODEL_DATA={tmp_path / 'corpora'}\n")


def test_a_read_only_root_whose_sets_are_verified_still_fetches_nothing_and_succeeds(tmp_path, capsys, monkeypatch,
                                                                                     server):
    """A shared copy no one may write into (the lock beside the folder cannot be made there)."""
    import os as os_module

    from viz_model.data import fetch as fetch_module

    monkeypatch.setitem(catalogue.DATA_SETS, "multi30k", captions_set())
    server.files = {f"/multi30k/{n}": b for n, b in CAPTIONS.items()}
    assert run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)[0] == 0
    real_open = os_module.open

    def read_only(path, flags, *args, **kwargs):
        if flags & os_module.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(fetch_module.os, "open", read_only)
    (tmp_path / ".multi30k.lock").unlink()
    code, out, err = run(capsys, "fetch", "multi30k", "--to", tmp_path, "--mirror", server.url)
    assert code == 0 and "(2 were there already)" in err, err
