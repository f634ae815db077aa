"""Downloading a data set of the catalogue into the data root: each file written to a temporary file in its folder
and renamed only once its SHA-256 matches the catalogue, so a cut-off or wrong download leaves nothing behind."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from .catalogue import DataSet, Download
from .textfiles import DataError

TIMEOUT_S = 60
USER_AGENT = "viz-model data fetch (Python urllib)"
CHUNK = 1 << 16


class FetchError(DataError):
    """A download failed, was cut off or does not match its checksum (and nothing of it was kept)."""


class OfflineError(FetchError):
    """The server could not be reached: the user can fetch the file by hand."""


def text_sha256(path: Path) -> str:
    """SHA-256 of a gzip'ed file's uncompressed bytes ("" where it is not a whole gzip file)."""
    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except (OSError, EOFError):
        return ""
    return digest.hexdigest()


def file_states(data: DataSet, folder: Path) -> dict[str, str]:
    """Per file of `data` in `folder`: "verified", "missing" or "differs" (its text is not the recorded one)."""
    return {name: ("missing" if not (folder / name).is_file()
                   else "verified" if text_sha256(folder / name) == sha else "differs")
            for name, sha in data.files.items()}


def source_url(data: DataSet, download: Download, mirror: str) -> str:
    """Where `download` is fetched from: the publisher's URL, or ``MIRROR/FOLDER/FILE`` with a mirror."""
    return f"{mirror.rstrip('/')}/{data.folder}/{download.file}" if mirror else download.url


def _temporary(folder: Path, name: str) -> Path:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
    os.close(fd)
    return Path(tmp)


def _offline_hint(data: DataSet, downloads: list[Download], folder: Path, mirror: str) -> str:
    """Which URL(s) to fetch by hand and where to put them, in one line."""
    urls = [source_url(data, d, mirror) for d in downloads]
    base = os.path.commonprefix(urls)
    base = base[:base.rfind("/") + 1]
    what = (urls[0] if len(urls) == 1 else
            f"the {len(urls)} files {' '.join(u[len(base):] for u in urls)} from {base}")
    return f"download {what} into {folder} and run `viz-model data fetch {data.name}` again"


def download(url: str, folder: Path, name: str, sha256: str = "", say: Callable[[str], None] = print) -> Path:
    """`url` into a temporary file in `folder` (the caller renames or removes it); a cut-off download, an HTTP
    error or a `sha256` mismatch removes it and raises `FetchError`, an unreachable server `OfflineError`."""
    tmp, connected, got, total = _temporary(folder, name), False, 0, None
    digest = hashlib.sha256()
    try:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, open(tmp, "wb") as out:
            connected = True
            say(f"downloading {url}")
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            with tqdm(total=total, unit="B", unit_scale=True, desc=name, file=sys.stderr, leave=False,
                      disable=None) as bar:
                while chunk := response.read(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    got += len(chunk)
                    bar.update(len(chunk))
        if total is not None and got != total:
            raise FetchError(f"the download of {url} was cut off after {got:,} of {total:,} bytes; nothing was kept "
                             "(run the command again)")
        if sha256 and digest.hexdigest() != sha256:
            raise FetchError(f"{url} has SHA-256 {digest.hexdigest()}, expected {sha256} (a changed or damaged "
                             "file); nothing was kept")
        return tmp
    except urllib.error.HTTPError as err:
        tmp.unlink(missing_ok=True)
        raise FetchError(f"{url}: HTTP {err.code} {err.reason}; nothing was kept") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        tmp.unlink(missing_ok=True)
        reason = getattr(err, "reason", None) or err
        if not connected:
            host = urllib.parse.urlsplit(url).netloc
            raise OfflineError(f"cannot reach {host} ({reason})") from None
        of = f" of {total:,}" if total is not None else ""
        raise FetchError(f"the download of {url} was cut off after {got:,}{of} bytes ({reason}); nothing was kept "
                         "(run the command again)") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def checked_text(path: Path, lines: list[str], sha256: str, origin: str) -> bytes:
    """`lines` as the UTF-8 text of `path` (a line end after each), if its SHA-256 is `sha256`."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    found = hashlib.sha256(data).hexdigest()
    if found != sha256:
        raise FetchError(f"{path.name} made from {origin} has SHA-256 {found}, expected {sha256}: not the version "
                         "the configs were made from; nothing was kept")
    return data


def write_gzip(path: Path, data: bytes) -> None:
    """`data` gzip'ed at `path` through a temporary file (no name or time in the gzip header: the same bytes every
    time)."""
    tmp = _temporary(path.parent, path.name)
    try:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def only_fetch(folder: Path) -> Iterator[None]:
    """Held while one fetch writes `folder` (a lock on ``.FOLDER.lock`` beside it, let go when the process ends,
    however it ends; none where that file cannot be made: a read-only root); a second fetch of the same folder is
    refused in one line."""
    lock = folder.parent / f".{folder.name}.lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a read-only root (a shared copy): no fetch can write there, a verified set needs nothing
        yield
        return
    try:
        try:
            if sys.platform == "win32":
                import msvcrt

                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            else:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise FetchError(f"another `viz-model data fetch` is writing {folder}; let it finish, then run the "
                             "command again") from None
        yield
    finally:
        os.close(fd)


def fetch(data: DataSet, root: Path, mirror: str = "", say: Callable[[str], None] = print) -> Path:
    """Download `data` into ``root/FOLDER`` and check every file against the catalogue; files already there and
    verified are kept, a file there that differs is an error. One fetch of a folder at a time. Returns the folder."""
    folder = root / data.folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise FetchError(f"cannot create {folder} ({err.strerror or err})") from None
    with only_fetch(folder):
        return _fetch_into(data, folder, mirror, say)


def _fetch_into(data: DataSet, folder: Path, mirror: str, say: Callable[[str], None]) -> Path:
    for name in [*data.files, *(d.file for d in data.downloads)]:  # left by a fetch that was killed
        for stale in folder.glob(f".{name}.*.part"):
            stale.unlink(missing_ok=True)
    states = file_states(data, folder)
    if differs := [name for name, state in states.items() if state == "differs"]:
        raise FetchError(f"{folder / differs[0]} is there but is not the recorded file (its text's SHA-256 differs); "
                         "move it away and run the command again")
    missing = [name for name, state in states.items() if state == "missing"]
    if data.convert is None:
        downloads = [d for d in data.downloads if d.file in missing]
    else:
        downloads = list(data.downloads) if missing else []
    fetched: dict[str, Path] = {}
    try:
        for i, d in enumerate(downloads):
            placed = folder / d.file
            if data.convert is not None and placed.is_file():  # put there by hand (say, offline): used as it is
                if d.sha256 and hashlib.sha256(placed.read_bytes()).hexdigest() != d.sha256:
                    raise FetchError(f"{placed} is not the published file (its SHA-256 differs); remove it and run "
                                     "the command again")
                fetched[d.file] = placed
                continue
            try:
                tmp = download(source_url(data, d, mirror), folder, d.file, d.sha256, say)
            except OfflineError as err:
                raise OfflineError(f"{err}: {_offline_hint(data, downloads[i:], folder, mirror)}") from None
            if data.convert is None:
                if text_sha256(tmp) != data.files[d.file]:
                    tmp.unlink()
                    raise FetchError(f"{source_url(data, d, mirror)} is not the recorded text of {d.file}; nothing "
                                     "was kept")
                os.chmod(tmp, 0o644)
                os.replace(tmp, folder / d.file)
            else:
                fetched[d.file] = tmp
        if data.convert is not None and missing:
            outputs, origin = data.convert(fetched), " + ".join(fetched)
            texts = {name: checked_text(folder / name, outputs[name], data.files[name], origin) for name in missing}
            for name, text in texts.items():  # written only once every one is verified
                write_gzip(folder / name, text)
    finally:
        for path in fetched.values():
            if path.name.endswith(".part"):
                path.unlink(missing_ok=True)
    kept = len(data.files) - len(missing)
    say(f"{data.name}: {len(data.files)} files in {folder}, each checked against its SHA-256"
        + (f" ({kept} were there already)" if kept else ""))
    return folder
