"""Every credential shape redaction promises, drawn from its provider's format, in realistic files.

The samples come from bench/secrets_corpus.py: a fresh random body of the right alphabet, length
and checksum for each provider format, and each assignment style in the language or configuration
syntax where people write it. Nothing here reads /work/shared: the corpus is generated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.guard import KINDS, redact
from nodwyn_retrieval.retrieval.words import words
from nodwyn_retrieval.store.chunkstore import ChunkStore
from nodwyn_retrieval.store.paths import project_dirs, project_key

from bench.secrets_corpus import PROVIDERS, SHAPES, STYLES, Sample, samples
from tests.support import make_repo

ALL = samples(per_shape=3, seed=7)
BY_SHAPE: dict[str, list[Sample]] = {}
for _s in ALL:
    BY_SHAPE.setdefault(_s.shape, []).append(_s)

# Formats that have no prefix of their own: they are caught by the name they are given (the
# assignment rule) or by the header they are sent in, so their kind is the name's.
KEYWORD_ONLY = {
    "cloudflare-api-token",
    "cloudflare-global-key",
    "discord-bot",
    "twilio-auth-token",
    "okta",  # in an SSWS header it is an okta-token; in OKTA_API_TOKEN=... a token
}
ASSIGNMENT_KINDS = {"password", "secret", "token", "api-key", "credential"}


def test_the_corpus_is_as_broad_as_promised() -> None:
    assert len(SHAPES()) >= 80
    assert len(samples()) >= 400
    assert set(BY_SHAPE) == set(SHAPES())


@pytest.mark.parametrize("shape", SHAPES())
def test_every_sample_of_a_shape_is_redacted(shape: str) -> None:
    for s in BY_SHAPE[shape]:
        out = redact(s.text)
        assert s.secret not in out.text, (s.path, out.text)
        assert out.count >= 1
        assert out.text.count("\n") == s.text.count("\n")
        assert redact(out.text).text == out.text


@pytest.mark.parametrize("shape", sorted(set(PROVIDERS) - KEYWORD_ONLY))
def test_a_provider_format_is_named_by_its_own_kind(shape: str) -> None:
    # A GitHub token assigned to GITHUB_TOKEN is a github-token, not just "a token".
    for s in BY_SHAPE[shape]:
        kinds = set(redact(s.text).kinds)
        assert kinds, s.path
        assert not kinds & ASSIGNMENT_KINDS, (s.path, kinds)


@pytest.mark.parametrize("shape", [s for s, _, _ in STYLES])
def test_an_assignment_style_keeps_the_name_and_drops_the_value(shape: str) -> None:
    for s in BY_SHAPE[shape]:
        out = redact(s.text).text
        assert "[REDACTED:" in out
        # Only the value goes: the rest of the line (the name, the quotes) stays.
        line = next(x for x in s.text.splitlines() if s.secret in x)
        kept = line.split(s.secret)
        assert all(part in out for part in kept if part.strip())


def test_every_kind_is_drawn_by_some_sample() -> None:
    seen = {k for s in ALL for k in redact(s.text).kinds}
    assert seen == set(KINDS)


def _secret_words(s: Sample, rest: set[str]) -> set[str]:
    """The words a search could find the secret by: those of it that no file holds elsewhere."""
    return {w for w in words(s.secret) if len(w) >= 6 and w not in rest}


@pytest.mark.asyncio
async def test_a_planted_corpus_reaches_neither_store_nor_result_nor_log(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    planted = [BY_SHAPE[shape][0] for shape in SHAPES()]
    repo = make_repo(tmp_path / "r", {s.path: s.text for s in planted})
    log = dirs[0] / "task.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    rest = {w for s in planted for w in words(s.path + " " + s.text.replace(s.secret, " "))}
    secret_words = {s.path: _secret_words(s, rest) for s in planted}
    # A short password's words are short: its bytes are still looked for everywhere below.
    assert sum(1 for w in secret_words.values() if w) >= len(planted) * 0.9
    shown: list[str] = []
    async with await Engine.open(
        repo, data_dir=dirs[0], config_dir=dirs[1], workers=1, log=log
    ) as engine:
        up = await engine.index_update()
        assert up.summary["read"] >= len(planted) * 0.9
        for q in ["password token secret", "api key credential", "config service", "export env"]:
            out = await engine.index_search(q, "repo", limit=20)
            shown.append(out.text)
            shown.append(json.dumps(out.to_json()))
        # An attacker asks for the secret's own words: no result may hold them (the output may
        # repeat the query, which is the asker's own text).
        for w in list(secret_words.values())[::7]:
            if w:
                out = await engine.index_search(" ".join(sorted(w)[:2]), "repo", limit=20)
                shown.append(json.dumps(out.hits))
    every_word: set[str] = set()
    chunks = ChunkStore(project_dirs(dirs[0], project_key(repo)).chunks)
    keys = [k for k, _, _ in chunks.iter_entries()]
    assert len(keys) >= len(planted) * 0.9
    for key in keys:
        rec = chunks.get(key)
        assert rec is not None
        every_word.update(rec.vocab)
    stored = [f.read_bytes() for f in dirs[0].rglob("*") if f.is_file()]
    logged = log.read_text()
    for s in planted:
        assert not secret_words[s.path] & every_word, s.path
        assert all(s.secret.encode() not in b for b in stored), s.path
        assert s.secret not in logged, s.path
        assert all(s.secret not in t for t in shown), s.path
