"""The corpora of a run: training pairs and evaluation sets of each, read and checked before training starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..config import ConfigError, CorpusConfig, TrainConfig
from ..config.data_root import DATA_ENV, is_data_set_name
from ..data.catalogue import by_folder
from ..data.textfiles import DataError, find_split, open_text, read_parallel
from .data import EvalSet
from .splits import HOLDOUT_RULES


@dataclass
class Corpus:
    """One corpus as read: its training pairs (empty for an evaluation-only corpus) and evaluation sets."""

    config: CorpusConfig
    train_src: list[str]
    train_tgt: list[str]
    val: EvalSet | None
    tests: list[EvalSet]

    @property
    def eval_sets(self) -> list[EvalSet]:
        return ([self.val] if self.val else []) + self.tests


def set_name(cfg: TrainConfig, corpus: str, split: str) -> str:
    """Name of an evaluation set in logs and results: ``corpus:split`` for [[corpora]] runs, else the split alone
    (the single-corpus format keeps its keys, e.g. ``test_2016_flickr/beam4``)."""
    return split if cfg.corpora is None else f"{corpus}:{split}"


def read_split(cfg: TrainConfig, corpus: CorpusConfig, prefix: str) -> tuple[list[str], list[str]]:
    """The aligned source and target lines of one split of `corpus` (of a decoder-only run: its text lines, as
    both); a data set missing from the data root is an error naming the command that fetches it."""
    folder = corpus.path
    if not folder.is_dir() and is_data_set_name(corpus.data_dir):
        known = by_folder(corpus.data_dir)
        how = f"`viz-model data fetch {known.name}` downloads it there" if known else "put the corpus there"
        raise DataError(f"{folder}: data directory not found; {how}, or set ${DATA_ENV} to the folder that holds "
                        f"{corpus.data_dir}/")
    if cfg.text_lang:
        return read_text(folder, prefix, cfg.text_lang)
    return read_parallel(folder, prefix, cfg.src_lang, cfg.tgt_lang)


def read_text(folder: Path, prefix: str, lang: str) -> tuple[list[str], list[str]]:
    """A decoder-only run's split: the lines of ``{prefix}.{lang}`` as both what is read and what is predicted."""
    if not folder.is_dir():
        raise DataError(f"{folder}: data directory not found")
    path = find_split(folder, prefix, lang)
    lines = open_text(path)
    if not any(line.strip() for line in lines):
        raise DataError(f"{path}: file is empty")
    return lines, lines


def read_eval_set(cfg: TrainConfig, corpus: CorpusConfig, prefix: str) -> EvalSet:
    """An aligned split of `corpus` (one reference per sentence) as an evaluation set."""
    src, tgt = read_split(cfg, corpus, prefix)
    return EvalSet.single(set_name(cfg, corpus.name, prefix), src, tgt, corpus.name)


def load_corpus(cfg: TrainConfig, corpus: CorpusConfig) -> Corpus:
    """Read every file of `corpus`; errors name the file. Missing test files of a single-corpus config are
    skipped with a note (as before [[corpora]]); in a [[corpora]] config every listed file must be there."""
    if corpus.holdout:
        src, tgt = read_split(cfg, corpus, corpus.holdout)
        split = HOLDOUT_RULES[corpus.holdout_rule](src, tgt, corpus.holdout_val, corpus.holdout_test,
                                                   corpus.holdout_seed)
        val = EvalSet(set_name(cfg, corpus.name, "val"), split.val_src, split.val_refs, corpus.name)
        test = EvalSet(set_name(cfg, corpus.name, "test"), split.test_src, split.test_refs, corpus.name)
        return Corpus(corpus, split.train_src, split.train_tgt, val if val.src else None,
                      [test] if test.src else [])
    train_src, train_tgt = read_split(cfg, corpus, corpus.train) if corpus.train else ([], [])
    val = read_eval_set(cfg, corpus, corpus.val) if corpus.val else None
    tests = []
    for prefix in corpus.test:
        try:
            tests.append(read_eval_set(cfg, corpus, prefix))
        except DataError as err:
            if cfg.corpora is not None:
                raise
            tqdm.write(f"skipping {prefix}: {err}")
    return Corpus(corpus, train_src, train_tgt, val, tests)


def load_corpora(cfg: TrainConfig) -> list[Corpus]:
    """All corpora of the run, in config order: everything that can be wrong with the data fails here."""
    return [load_corpus(cfg, corpus) for corpus in cfg.corpus_list]


def select_eval_sets(cfg: TrainConfig, names: tuple[str, ...]) -> list[EvalSet]:
    """Evaluation sets by name, for scoring an exported run: ``all``, a set (``tatoeba:test``), or a whole corpus
    (``wmt``). A single-corpus run takes any split prefix of its data directory; a missing one is skipped."""
    if cfg.corpora is None:
        corpus = cfg.corpus_list[0]
        prefixes = (cfg.val_prefix, *cfg.test_prefixes) if "all" in names else names
        return load_corpus(cfg, CorpusConfig(corpus.name, corpus.data_dir, test=tuple(prefixes))).tests
    sets = [s for corpus in load_corpora(cfg) for s in corpus.eval_sets]
    chosen = []
    for name in names:
        found = [s for s in sets if name in ("all", s.name, s.corpus)]
        if not found:
            raise ConfigError(f"no evaluation set {name!r}; this run has {', '.join(s.name for s in sets)}")
        chosen += [s for s in found if s.name not in {c.name for c in chosen}]
    return chosen
