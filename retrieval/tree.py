"""A working tree's index: chunks ranked by BM25, the path and first line weighted (§6).

A :class:`TreeSegment` is a :class:`~retrieval.bm25.Segment` whose documents are the chunks of a
list of files, with the table that maps a document back to its file and lines. A
:class:`TreeIndex` is what a session searches: a base segment (built once, or loaded from the
store), the files that changed since it was built, held in a small delta segment, and the base
documents those files replaced, masked out. A change of one file rebuilds only the delta, so a
search after an edit costs about what a search of an unchanged tree does (the ADR's Go program
rebuilt the whole index; its 2026-10-16 amendment lists that as not done). The segment, the
batches' postings and the builder of a first build are in retrieval/tree_build.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from nodwyn_retrieval.retrieval.analyze import FileRecord
from nodwyn_retrieval.retrieval.bm25 import (
    Part,
    Segment,
    count_matching,
    merge_segments,
    score_parts,
    search_all,
)
from nodwyn_retrieval.retrieval.chunks import DEFINED
from nodwyn_retrieval.retrieval.kinds import (
    KINDS,
    PRIORS,
    file_kind,
    in_version,
    legacy_dirs,
    lifted_kinds,
    versions_named,
)
from nodwyn_retrieval.retrieval.tree_best import best_files, most_factor
from nodwyn_retrieval.retrieval.tree_build import (
    FIRST_LINE_WEIGHT,
    PATH_WEIGHT,
    Pairs,
    TreeBuilder,
    TreeSegment,
    pairs_of,
)
from nodwyn_retrieval.retrieval.words import form_prefix, stem, word_forms

__all__ = [
    "FIRST_LINE_WEIGHT",
    "PATH_WEIGHT",
    "RANKING",
    "Pairs",
    "Ranking",
    "TreeBuilder",
    "TreeHit",
    "TreeIndex",
    "TreeSegment",
    "pairs_of",
]

I64 = npt.NDArray[np.int64]
_NO_FILES: I64 = np.zeros(0, dtype=np.int64)
_KIND_CODES = {k: i for i, k in enumerate(KINDS)}


_STEM_PREFIX = 3
"""A word's forms are listed from a sorted vocabulary by their common prefix when it has at
least this many letters,"""
_PREFIX_WORDS = 64
"""and at most this many words begin with it; otherwise the likely forms are asked one by one."""


@dataclass(frozen=True, slots=True)
class TreeHit:
    """A ranked chunk."""

    path: str
    """The file, relative to the tree's root, as git lists it."""
    start: int
    """The chunk's first line, 1-based."""
    end: int
    """The chunk's last line, inclusive."""
    score: float
    """Its BM25 score."""


@dataclass(frozen=True)
class Ranking:
    """How a repository search ranks files and picks their chunks (docs/quality.md).

    A chunk scores by BM25 over its words, its path's and its first line's (§6), plus each
    query word's definition term (a chunk that defines the name) at ``definition`` times the
    word's weight, and each other form of a query word (same stem) at ``forms`` times its weight.
    A file scores by its chunks, best first, the i-th counted ``decay ** i``; times its kind's
    prior unless the query names the kind; times ``1 + name * sqrt(share)`` where share is the
    query weight of the words its file name holds (``sessions.py`` for "session").
    Files are shown best first, each with its best chunk and up to ``per_file - 1`` more that
    score at least ``more`` times its best: one chunk a file by default, which showed the most
    right files in a search's first 8 results (docs/quality.md). The chunks are chosen in order,
    so a longer list begins with a shorter one.
    """

    definition: float = 0.75
    forms: float = 0.5
    decay: float = 0.6
    name: float = 0.5
    priors: Mapping[str, float] = field(default_factory=lambda: dict(PRIORS))
    per_file: int = 1
    more: float = 0.8


RANKING = Ranking()
"""The ranking a search uses."""


def _holds(segment: Segment) -> Callable[[str], bool]:
    """Whether segment holds a word."""
    return lambda word: segment.word_id(word) is not None


def _path_mask(files: Sequence[str], file_docs: I64, prefix: str | None) -> npt.NDArray[np.bool_]:
    """Documents of the files at prefix: the file itself, or anything under the directory."""
    n = int(file_docs[-1]) if len(file_docs) else 0
    mask = np.zeros(n, dtype=np.bool_)
    if prefix is None:
        mask[:] = True
        return mask
    p = prefix.strip("/")
    under = p + "/"
    for i, f in enumerate(files):
        if p in ("", f) or f.startswith(under):
            mask[int(file_docs[i]) : int(file_docs[i + 1])] = True
    return mask


_LEGACY = KINDS.index("legacy")


class TreeIndex:
    """The index a session searches: a base segment, a delta of changed files, and what they mask.

    ``files`` maps each indexed path to its content key, whichever segment holds it.
    """

    # Past this many delta documents, or a tenth of the base, the delta is merged into the base.
    COMPACT_DOCS = 4096

    def __init__(self, base: TreeSegment | None = None) -> None:
        self._reset(base if base is not None else TreeSegment.build(()))

    def _reset(self, base: TreeSegment) -> None:
        self.base = base
        self._base_pos = {f: i for i, f in enumerate(self.base.files)}
        self._live = np.ones(self.base.n_docs, dtype=np.bool_)
        self._overrides: dict[str, tuple[str, FileRecord] | None] = {}
        self.delta = TreeSegment.build(())
        self.files: dict[str, str] = dict(zip(self.base.files, self.base.keys, strict=True))
        self._kind_base: TreeSegment | None = None
        self._kind_delta: TreeSegment | None = None
        self._legacy: frozenset[str] = frozenset()
        self._base_kinds: I64 = np.zeros(0, dtype=np.int64)
        self._delta_kinds: I64 = np.zeros(0, dtype=np.int64)

    def __repr__(self) -> str:
        return (
            f"<TreeIndex files={len(self.files)} base_docs={self.base.n_docs} "
            f"delta_docs={self.delta.n_docs} overridden={len(self._overrides)}>"
        )

    @property
    def n_docs(self) -> int:
        return int(np.count_nonzero(self._live)) + self.delta.n_docs

    def apply(
        self,
        changes: Mapping[str, tuple[str, FileRecord] | None],
        *,
        merge: Callable[[TreeIndex], bool] | None = None,
    ) -> None:
        """Replace, add (path -> (key, record)) or remove (path -> None) files.

        ``merge``, asked once the delta is built and large enough to merge, may answer False to
        keep it as it is: a caller near its time bound (a search) merges later. Scores are the
        same either way.
        """
        if not changes:
            return
        for path, new in changes.items():
            i = self._base_pos.get(path)
            if i is not None:
                a, b = int(self.base.file_docs[i]), int(self.base.file_docs[i + 1])
                self._live[a:b] = False
            if new is None:
                self.files.pop(path, None)
                if i is None:
                    self._overrides.pop(path, None)
                else:
                    self._overrides[path] = None
            else:
                self.files[path] = new[0]
                self._overrides[path] = new
        self.delta = TreeSegment.build(
            (p, kv[0], kv[1]) for p, kv in self._overrides.items() if kv is not None
        )
        # With nothing of the base left (a first build) the delta becomes the base for free.
        big = self.delta.n_docs > max(self.COMPACT_DOCS, self.base.n_docs // 10)
        if not self._live.any() or (big and (merge is None or merge(self))):
            self.compact()

    def __copy__(self) -> TreeIndex:
        """A copy that later changes to this index leave as it is: a merge of it may be made in
        a thread (:meth:`compact`) while this index goes on changing."""
        other = TreeIndex.__new__(TreeIndex)
        other.__dict__.update(self.__dict__)
        other._live = self._live.copy()  # the only parts apply changes in place
        other._overrides = dict(self._overrides)
        other.files = dict(self.files)
        return other

    def warm(self) -> None:
        """Compute now what every search needs (each document's file, the tree's versioned
        directories). A file's kind and the words of its name are computed when a search first
        ranks the file: for every file at once they take seconds on a big tree on a loaded
        machine, most of them for files the first search does not rank."""
        self._kinds_of(_NO_FILES)
        self.base.file_of_doc()

    @property
    def dirty(self) -> bool:
        """Whether the base no longer holds the index as a whole (a snapshot would be stale)."""
        return bool(self._overrides)

    def compact(self) -> None:
        """Merge the delta into a new base."""
        if not self._overrides:
            return
        if not self._live.any():
            # Nothing of the base is left (a first build): the delta is the new base as it is.
            self._reset(self.delta)
            return
        merged, remaps = merge_segments(
            [(self.base.segment, self._live), (self.delta.segment, None)]
        )
        keep_files = [i for i, f in enumerate(self.base.files) if f not in self._overrides]
        files = [self.base.files[i] for i in keep_files] + list(self.delta.files)
        keys = [self.base.keys[i] for i in keep_files] + list(self.delta.keys)
        counts = [int(self.base.file_docs[i + 1] - self.base.file_docs[i]) for i in keep_files]
        counts += list(np.diff(self.delta.file_docs).tolist())
        file_docs = np.zeros(len(files) + 1, dtype=np.int64)
        np.cumsum(np.asarray(counts, dtype=np.int64), out=file_docs[1:])
        starts = np.concatenate([self.base.starts[self._live], self.delta.starts])
        ends = np.concatenate([self.base.ends[self._live], self.delta.ends])
        # merge_segments keeps the live documents in order, base first, so the tables above line
        # up with its numbering without consulting the remaps.
        del remaps
        self._reset(TreeSegment(merged, files, keys, file_docs, starts, ends))

    def search(
        self, query_words: Sequence[str], limit: int, prefix: str | None = None
    ) -> list[TreeHit]:
        """The best chunks for the words; prefix narrows to a file or a directory (§1)."""
        parts = self._parts(prefix)
        out: list[TreeHit] = []
        trees = (self.base, self.delta)
        for hit in search_all(parts, query_words, limit):
            t = trees[hit.part]
            f = int(t.file_of_doc()[hit.doc])
            out.append(TreeHit(t.files[f], int(t.starts[hit.doc]), int(t.ends[hit.doc]), hit.score))
        return out

    def count_matching(self, query_words: Sequence[str], prefix: str | None = None) -> int:
        """How many chunks hold at least one of the words (within prefix): a search's header."""
        return count_matching(self._parts(prefix), query_words)

    def _parts(self, prefix: str | None) -> list[Part]:
        """The two segments as parts of one search, each narrowed to prefix when given."""
        base_allow = (
            None if prefix is None else _path_mask(self.base.files, self.base.file_docs, prefix)
        )
        delta_allow = (
            None if prefix is None else _path_mask(self.delta.files, self.delta.file_docs, prefix)
        )
        return [
            Part(self.base.segment, self._live if self._overrides else None, base_allow),
            Part(self.delta.segment, None, delta_allow),
        ]

    def _kinds_of(self, keys: I64) -> I64:
        """The kinds of these files (keys: an index in base, or n_base + an index in delta), each
        an index into KINDS. A base file's kind is computed once, when first asked; the delta's
        (few files) all at once when it changes. The tree's versioned directories are those of
        the base."""
        if self._kind_base is not self.base:
            self._legacy = legacy_dirs(self.base.files)
            self._base_kinds = np.full(len(self.base.files), -1, dtype=np.int64)
            self._kind_base = self.base
            self._kind_delta = None
        if self._kind_delta is not self.delta:
            self._delta_kinds = np.fromiter(
                (_KIND_CODES[file_kind(p, self._legacy)] for p in self.delta.files),
                np.int64,
                len(self.delta.files),
            )
            self._kind_delta = self.delta
        n_base = len(self.base.files)
        in_base = keys < n_base
        base_keys = keys[in_base]
        known = self._base_kinds
        # Each once (not np.unique: its first call imports numpy.ma, 10 to 25 ms in a new process).
        todo = list(dict.fromkeys(base_keys[known[base_keys] < 0].tolist()))
        if todo:
            files, legacy = self.base.files, self._legacy
            known[todo] = [_KIND_CODES[file_kind(files[f], legacy)] for f in todo]
        out = np.empty(keys.shape[0], dtype=np.int64)
        out[in_base] = known[base_keys]
        out[~in_base] = self._delta_kinds[keys[~in_base] - n_base]
        return out

    def has_word(self, word: str) -> bool:
        """Whether any chunk of the index holds word."""
        return self.base.segment.word_id(word) is not None or (
            self.delta.segment.word_id(word) is not None
        )

    def forms(self, word: str) -> list[str]:
        """The other forms of word the index holds (:func:`retrieval.words.word_forms`): from
        each segment's sorted vocabulary where it can list the words of the prefix, else by
        asking for each likely form."""
        prefix = form_prefix(word)
        if len(prefix) < _STEM_PREFIX:
            return word_forms(word, self.has_word)
        found: dict[str, None] = {}
        for seg in (self.base.segment, self.delta.segment):
            if not seg.n_docs:
                continue
            known = seg.with_prefix(prefix, _PREFIX_WORDS)
            found.update(dict.fromkeys(word_forms(word, _holds(seg), known)))
        return list(found)

    def expand(self, query: Mapping[str, float], ranking: Ranking = RANKING) -> dict[str, float]:
        """The terms a query ranks by: its words, their definition terms and their other forms."""
        terms: dict[str, float] = {}

        def add(term: str, weight: float) -> None:
            if weight > terms.get(term, 0.0):
                terms[term] = weight

        for w, q in query.items():
            add(w, q)
            if ranking.definition:
                add(DEFINED + w, q * ranking.definition)
            if ranking.forms:
                for f in self.forms(w):
                    add(f, q * ranking.forms)
                    if ranking.definition:
                        add(DEFINED + f, q * ranking.forms * ranking.definition)
        return terms

    def rank(
        self,
        query: Mapping[str, float],
        limit: int,
        prefix: str | None = None,
        ranking: Ranking = RANKING,
    ) -> list[TreeHit]:
        """The best chunks of the best files for a weighted query (:class:`Ranking`).

        prefix narrows to a file or a directory (§1). At most ``limit`` chunks.
        """
        hits, _ = self.rank_files(query, limit, prefix, ranking, every_file=False)
        return hits

    def rank_files(
        self,
        query: Mapping[str, float],
        limit: int,
        prefix: str | None = None,
        ranking: Ranking = RANKING,
        *,
        every_file: bool = True,
    ) -> tuple[list[TreeHit], list[str]]:
        """:meth:`rank`'s chunks, and every matching file in rank order (only the files shown
        unless every_file)."""
        if limit <= 0 or not query:
            return [], []
        scored = score_parts(self._parts(prefix), self.expand(query, ranking))
        if not scored:
            return [], []
        trees = (self.base, self.delta)
        n_base = len(self.base.files)
        # A file's key: its index in base, or n_base + its index in delta.
        fk: list[I64] = []
        for sc in scored:
            of_doc = trees[sc.part].file_of_doc()[sc.docs]
            fk.append(of_doc + (n_base if sc.part else 0))
        file_key = np.concatenate(fk)
        doc_part = np.concatenate([np.full(sc.docs.size, sc.part, np.int64) for sc in scored])
        doc = np.concatenate([sc.docs for sc in scored])
        score = np.concatenate([sc.scores for sc in scored])
        # Each file's chunks best first; the i-th weighs decay**i.
        order = np.lexsort((doc, doc_part, -score, file_key))
        fko = file_key[order]
        first = np.flatnonzero(np.concatenate(([True], fko[1:] != fko[:-1])))
        counts = np.diff(np.append(first, fko.size))
        nth = np.arange(fko.size) - np.repeat(first, counts)
        decayed = score[order] * np.power(ranking.decay, nth.astype(np.float64))
        files = fko[first]
        total = np.add.reduceat(decayed, first) if decayed.size else decayed
        # Priors by kind, lifted for the kinds the query names.
        lifted = lifted_kinds(query)
        prior = np.asarray(
            [1.0 if k in lifted else ranking.priors.get(k, 1.0) for k in KINDS], np.float64
        )
        versions = versions_named(query) if "legacy" not in lifted else frozenset()
        weight = sum(query.values()) or 1.0
        # The query weight of each stem of its words (a file name's words are matched by stem).
        qstems: dict[str, float] = {}
        for w, q in query.items():
            s = stem(w)
            qstems[s] = max(qstems.get(s, 0.0), q)

        def final_of(sel: I64) -> npt.NDArray[np.float64]:
            """The final scores of the files at positions sel: by kind, then by name."""
            kind = self._kinds_of(files[sel])
            factor = prior[kind]
            if versions:
                # An older copy in the directory of a version the query names is what it asks for.
                for i in np.flatnonzero(kind == _LEGACY).tolist():
                    f = int(files[sel[i]])
                    path = self.base.files[f] if f < n_base else self.delta.files[f - n_base]
                    if in_version(path, versions):
                        factor[i] = 1.0
            out = total[sel] * factor
            if ranking.name:
                # Each ranked file's share: its stems' weights added in the query's order.
                named = np.zeros(sel.shape[0], dtype=np.float64)
                for i, f in enumerate(files[sel].tolist()):
                    held = (self.base, f) if f < n_base else (self.delta, f - n_base)
                    stems = held[0].name_stems(held[1])
                    total_q = 0.0
                    for s, q in qstems.items():
                        if s in stems:
                            total_q += q
                    named[i] = total_q
                share = np.minimum(named / weight, 1.0)
                out = out * (1.0 + ranking.name * np.sqrt(share))
            return out

        if every_file:
            sel = np.arange(files.shape[0], dtype=np.int64)
            final = final_of(sel)
        else:
            sel, final = best_files(total, limit, final_of, most_factor(prior, ranking.name))
        rank_files = sel[np.lexsort((files[sel], -final))]
        # The chunks shown: each file's best, and more of it that score near its best.
        out: list[TreeHit] = []
        paths: list[str] = []
        for i in rank_files.tolist():
            f = int(files[i])
            t, j = (self.base, f) if f < n_base else (self.delta, f - n_base)
            if len(out) >= limit:
                if not every_file:
                    break
                paths.append(t.files[j])
                continue
            paths.append(t.files[j])
            a = int(first[i])
            best = float(score[order[a]])
            for r in range(min(int(counts[i]), ranking.per_file)):
                o = int(order[a + r])
                s_o = float(score[o])
                if r and s_o < ranking.more * best:
                    break
                if len(out) >= limit:
                    break
                d = int(doc[o])
                out.append(TreeHit(t.files[j], int(t.starts[d]), int(t.ends[d]), s_o))
        return out, paths

    def snapshot(self) -> TreeSegment:
        """The whole index as one segment (compacting first)."""
        self.compact()
        return self.base
