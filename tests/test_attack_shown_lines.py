"""Lines a search shows of a credential over several lines whose start is in another chunk.

The index is built from each file redacted whole, but a search read its best chunks again from
the working tree and redacted each chunk alone. A chunk holds at most 80 lines: one starting
inside a private key's block held the key's base64 lines and its END line with no BEGIN line
before them, and showed them (the first of them as the result's head); a Kubernetes Secret as
``kubectl get -o yaml`` writes it (``data:`` before ``kind: Secret``) showed the values of a
chunk the ``kind`` line was not in. A search now redacts the whole file, as the indexer does.

And a turn's card, which holds the first line of its first message cut at 100 characters: the
line was cut, then redacted, so a token the cut went through was shown up to the cut.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest
from nodwyn_retrieval.entry import Engine
from nodwyn_retrieval.retrieval.events import CardMaker
from nodwyn_retrieval.store.mem import mem_path

from tests.support import Log, make_repo
from tests.test_conversation import search

RNG = random.Random(20261203)


def b64(nbytes: int) -> str:
    return base64.b64encode(bytes(RNG.randrange(256) for _ in range(nbytes))).decode()


@pytest.mark.asyncio
async def test_a_chunk_starting_inside_a_private_key_shows_none_of_it(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    body = b64(48 * 40)
    key_lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    lines = [f"filler line {i} about pelicans" for i in range(60)]
    lines += ["-----BEGIN RSA PRIVATE KEY-----", *key_lines, "-----END RSA PRIVATE KEY-----"]
    lines += [f"trailing note {i} on cormorants" for i in range(30)]
    secret = "".join(f"{line}\n" for line in lines)
    # The same key at the top of another file, in one chunk: redacted before too.
    files = {"keys/deploy.txt": secret, "keys/whole.txt": "\n".join(lines[60:]) + "\n"}
    repo = make_repo(tmp_path / "repo", files)
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        out = await engine.index_search("cormorants trailing note", "repo", limit=10)
    shown = out.text + json.dumps(out.to_json())
    assert "keys/deploy.txt" in {h["path"] for h in out.hits}
    # The chunk holding the key's end starts inside the key: no line of it is shown.
    assert any(h["path"] == "keys/deploy.txt" and 62 <= h["start"] <= 101 for h in out.hits)
    for line in key_lines:
        assert line not in shown, line


def _kubectl_secret(values: dict[str, str]) -> str:
    """A Secret as `kubectl get secret -o yaml` writes it: its keys in order, data first."""
    data = "".join(f"  {k}: {v}\n" for k, v in values.items())
    return (
        "apiVersion: v1\ndata:\n" + data + "kind: Secret\nmetadata:\n  name: shop-keys\n"
        "  namespace: prod\ntype: Opaque\n"
    )


@pytest.mark.asyncio
async def test_a_secret_whose_kind_follows_its_data_in_another_chunk_shows_no_value(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    values = {f"heron_key_{i:02d}": b64(24) for i in range(100)}
    repo = make_repo(tmp_path / "repo", {"deploy/keys.yaml": _kubectl_secret(values)})
    async with await Engine.open(repo, data_dir=dirs[0], config_dir=dirs[1], workers=1) as engine:
        out = await engine.index_search("heron_key_05 heron_key_40 heron_key_90", "repo", limit=10)
    shown = out.text + json.dumps(out.to_json())
    assert out.hits
    assert "[REDACTED:kubernetes-secret]" in shown
    for value in values.values():
        assert value not in shown, value


TOKEN = "ghp_" + "Rk7Yw2Qn5Tz8Lm3Vx6Hc9Jd4Pf1Bs0Ga5Ne8"


@pytest.mark.parametrize("before", [60, 80, 92])
def test_a_card_s_line_cut_inside_a_credential_shows_none_of_it(before: int) -> None:
    # A card holds the first line of a turn's message, cut at 100 characters: it was cut first
    # and redacted after, and a token cut short is no longer its shape (ghp_ and 36).
    text = ("Please deploy the release " * 10)[:before] + f" {TOKEN} now\nand report back"
    maker = CardMaker()
    maker.add({"seq": 1, "turn": 1, "kind": "person.message", "text": text})
    line = maker.cards()[0].line
    assert line.startswith("Please deploy")
    assert len(line) <= 100
    for i in range(len(TOKEN) - 6):
        assert TOKEN[i : i + 6] not in line, line


@pytest.mark.asyncio
async def test_a_card_s_credential_reaches_neither_the_mem_nor_a_search(tmp_path: Path) -> None:
    log = Log(tmp_path / "task.jsonl")
    log.add("person.message", text="Deploy the egret release with " * 2 + TOKEN + " please")
    log.call("shell", "egret deployed", cmd="make deploy")
    log.end_turn()
    out = await search(log.path, "egret release deployed")
    assert out.hits
    shown = out.text + json.dumps(out.hits)
    mem = mem_path(log.path).read_bytes()
    for i in range(len(TOKEN) - 6):
        assert TOKEN[i : i + 6] not in shown
        assert TOKEN[i : i + 6].encode() not in mem, TOKEN[i : i + 6]
