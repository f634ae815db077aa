"""The corpora the training configs read: where each is published, how its files are made from what is published,
the SHA-256 of every file, its licence and citation. `viz_model.data.fetch` downloads them."""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .textfiles import DataError


class CatalogueError(DataError):
    """A published file cannot be read as the catalogue says it is made (a damaged or another archive)."""


@dataclass(frozen=True)
class Download:
    """One published file: its URL, the name it is saved under, the SHA-256 of its bytes ("" where not recorded:
    the result's checksums are checked instead)."""

    url: str
    file: str
    sha256: str = ""


Converter = Callable[[dict[str, Path]], dict[str, list[str]]]


@dataclass(frozen=True)
class DataSet:
    """A corpus: `folder` under the data root, `files` (each gzip'ed UTF-8 text, one sentence a line) with the
    SHA-256 of its uncompressed text, the `downloads` they are made from and how (`convert`; None: the downloads
    are the files)."""

    name: str
    folder: str
    title: str
    licence: str
    citation: str
    made: str
    downloads: tuple[Download, ...]
    files: dict[str, str] = field(default_factory=dict)
    convert: Converter | None = None


# "add task1 raw data files", 2018-01-17: the files' last change (the same bytes at the repository's HEAD)
MULTI30K_COMMIT = "c9be912dc05a3ebf9ae5bb5f7f58c1791cda43ab"
MULTI30K_RAW = f"https://raw.githubusercontent.com/multi30k/dataset/{MULTI30K_COMMIT}/data/task1/raw/"
MULTI30K = {  # file: (SHA-256 of the published .gz bytes, SHA-256 of its text)
    "train.en.gz": ("d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
                    "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6"),
    "train.de.gz": ("726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
                    "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72"),
    "train.fr.gz": ("622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
                    "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d"),
    "val.en.gz": ("14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
                  "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227"),
    "val.de.gz": ("f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
                  "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660"),
    "val.fr.gz": ("ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
                  "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc"),
    "test_2016_flickr.en.gz": ("611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
                               "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182"),
    "test_2016_flickr.de.gz": ("9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
                               "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16"),
    "test_2016_flickr.fr.gz": ("6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
                               "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6"),
    "test_2017_flickr.en.gz": ("76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074",
                               "ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98"),
    "test_2017_flickr.de.gz": ("a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee",
                               "c3078bc3b36808bf9d20eb2347ed6137016179ef59ec0d2b9b8ecc3fb2880081"),
    "test_2017_flickr.fr.gz": ("3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496",
                               "6f3764e31dac41e9455e612958bcfd4e877c5e15cd66df2c2b2be6d9bd83e5b6"),
    "test_2017_mscoco.en.gz": ("aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58",
                               "43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2"),
    "test_2017_mscoco.de.gz": ("799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338",
                               "58277df3c75f92f7145a11b910b553d1cf82c439249d4dc237c899609eafac22"),
    "test_2017_mscoco.fr.gz": ("754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0",
                               "39cde3f43f32b0a6bf29ce4917a46329ff32e53070c2fac87506695a740ae0a0"),
}

# The Anki export of 2018-05-13 (the one the configs and the shipped models use), as the Internet Archive keeps it:
# manythings.org itself serves only its newest export, which has more pairs and a third (attribution) column.
TATOEBA_URL = "https://web.archive.org/web/20180601000000id_/http://www.manythings.org/anki/deu-eng.zip"
# The WMT14 test sets as released after the evaluation ("full": 3,003 sentences in both directions), as sacrebleu's
# wmt14/full reads them.
WMT14_URL = "https://statmt.org/wmt14/test-full.tgz"
WMT14_MEMBERS = {"newstest2014.en.gz": "test-full/newstest2014-deen-src.en.sgm",
                 "newstest2014.de.gz": "test-full/newstest2014-deen-ref.de.sgm"}


def tatoeba_pairs(sources: dict[str, Path]) -> dict[str, list[str]]:
    """``deu.txt`` of the Anki zip (English TAB German [TAB attribution] a line, in its order) as two files."""
    try:
        with zipfile.ZipFile(sources["deu-eng.zip"]) as archive:
            text = archive.read("deu.txt").decode("utf-8-sig")
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as err:
        raise CatalogueError(f"deu-eng.zip: not the Anki export the catalogue names ({err})") from None
    en, de = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise CatalogueError(f"deu-eng.zip: deu.txt line {number} has no tab between English and German")
        en.append(fields[0].strip())
        de.append(fields[1].strip())
    return {"pairs.en.gz": en, "pairs.de.gz": de}


def sgm_segments(text: str) -> list[str]:
    """The sentences of a WMT ``.sgm`` file, as sacrebleu reads them: every ``<seg ...>`` line's text, trimmed,
    runs of white space as one space."""
    return [re.sub(r"\s+", " ", re.sub(r"<seg.*?>(.*)</seg>.*?", "\\1", line).strip())
            for line in text.splitlines() if line.startswith("<seg ")]


def wmt14_newstest(sources: dict[str, Path]) -> dict[str, list[str]]:
    """newstest2014 English-German from the WMT14 test archive."""
    out = {}
    try:
        with tarfile.open(sources["test-full.tgz"], "r:gz") as archive:
            for name, member in WMT14_MEMBERS.items():
                handle = archive.extractfile(member)
                if handle is None:
                    raise KeyError(member)
                out[name] = sgm_segments(io.TextIOWrapper(handle, encoding="utf-8").read())
    except (tarfile.TarError, KeyError, OSError, EOFError, UnicodeDecodeError) as err:
        raise CatalogueError(f"test-full.tgz: not the WMT14 test archive the catalogue names ({err})") from None
    return out


DATA_SETS: dict[str, DataSet] = {s.name: s for s in (
    DataSet(
        name="multi30k", folder="multi30k",
        title="Multi30K task 1: image captions, English-German-French (29,000 train, 1,014 val, three test sets)",
        licence="for non-commercial research and education (the captions describe Flickr30K images; Flickr's terms "
                "of use apply to the images)",
        citation="Elliott, Frank, Sima'an, Specia. Multi30K: Multilingual English-German Image Descriptions. "
                 "Proceedings of the 5th Workshop on Vision and Language, 2016; French and the 2017 test sets: "
                 "Elliott et al., Findings of the Second Shared Task on Multimodal Machine Translation and "
                 "Multilingual Image Description, WMT 2017",
        made="the raw (untokenized, cased) files of github.com/multi30k/dataset, data/task1/raw/, as published",
        downloads=tuple(Download(MULTI30K_RAW + name, name, published) for name, (published, _) in MULTI30K.items()),
        files={name: text for name, (_, text) in MULTI30K.items()}),
    DataSet(
        name="tatoeba", folder="tatoeba",
        title="Tatoeba: 169,813 everyday English-German sentence pairs (manythings.org's Anki export of 2018-05-13)",
        licence="CC-BY 2.0 (France); attribution: www.manythings.org/anki and tatoeba.org",
        citation="Tatoeba (tatoeba.org), sentence pairs as exported by www.manythings.org/anki, version 2018-05-13",
        made="deu.txt of deu-eng.zip split into its English and German columns, line order kept",
        downloads=(Download(TATOEBA_URL, "deu-eng.zip"),),
        files={"pairs.en.gz": "7948e7d621a2e97c550123dbd174784894e83e6e140cf72e400d4ce5170cdce1",
               "pairs.de.gz": "78b90b42ef51b2809d5629f803bba882e01c0fe6435ee9c2928deb5cc7ea2ad6"},
        convert=tatoeba_pairs),
    DataSet(
        name="wmt14", folder="wmt",
        title="WMT14 newstest2014 English-German (3,003 sentences): the paper's test set, for evaluation only",
        licence="free for research use (WMT14 shared task data); cite the overview paper",
        citation="Bojar et al. Findings of the 2014 Workshop on Statistical Machine Translation. Proceedings of the "
                 "Ninth Workshop on Statistical Machine Translation, 2014",
        made="the <seg> lines of newstest2014-deen-src.en.sgm and -ref.de.sgm in test-full.tgz, white space "
             "collapsed (what sacrebleu -t wmt14/full -l en-de reads)",
        downloads=(Download(WMT14_URL, "test-full.tgz"),),
        files={"newstest2014.en.gz": "7294bccf2879a97b3706b95c9595f1459617a8ee7130d5d8581c910e69736971",
               "newstest2014.de.gz": "ae5d110486bc33d7175e9e28c7d0051eb3e5fcd2166dd93371089852c091a20e"},
        convert=wmt14_newstest),
)}


def data_set(name: str) -> DataSet:
    """The data set called `name`; an unknown name is a one-line error listing the known ones."""
    if name not in DATA_SETS:
        raise CatalogueError(f"no data set {name!r}; the data sets are {', '.join(DATA_SETS)}")
    return DATA_SETS[name]


def by_folder(folder: str) -> DataSet | None:
    """The data set kept in `folder` under the data root (``wmt`` for wmt14), if any."""
    return next((s for s in DATA_SETS.values() if s.folder == folder), None)
