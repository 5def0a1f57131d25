"""Kubernetes Secrets: every value under a Secret's ``data:`` or ``stringData:`` is a credential,
whatever its key is called (docs/redaction.md, the ``kubernetes-secret`` kind).

A Secret is the YAML document whose ``kind: Secret`` line a locator found, or the one item of a
list of resources (``- kind: Secret``, as ``kubectl get -o yaml`` writes several) that holds it.
Values that are references (``{{ .Values.x }}``) or already markers stay. Pure text work, used by
:mod:`nodwyn_retrieval.guard.redact`.
"""

from __future__ import annotations

import re

from nodwyn_retrieval.guard.secret_values import MARKER_PREFIX, REFERENCE

__all__ = ["with_secret_data"]

# A Kubernetes Secret: every value under its data: or stringData: is a secret, whatever its name.
_K8S_KIND = re.compile(
    r"""(?P<ind>[ \t]*(?:-[ \t]+)?)kind:[ \t]*["']?Secret["']?[ \t]*(?:#[^\n]*)?"""
)
_K8S_ITEM = re.compile(r"^(?P<ind>[ \t]*)-[ \t]+", re.MULTILINE)
_K8S_DATA = re.compile(r"^(?P<ind>[ \t]*)(?:data|stringData):[ \t]*$", re.MULTILINE)
_K8S_ENTRY = re.compile(r"""(?P<ind>[ \t]+)["']?[\w.-]+["']?:[ \t]*(?P<v>[^\n]*)""")
_K8S_BLOCK = frozenset({"|", "|-", "|+", ">", ">-", ">+"})


def _line_end(text: str, pos: int, limit: int) -> int:
    end = text.find("\n", pos, limit)
    return limit if end < 0 else end


def _k8s_block(text: str, eol: int, indent: int, doc_end: int) -> tuple[int, int]:
    """(start, end) of a block scalar's lines after the line ending at eol; start == end: none."""
    last = eol
    nxt = eol + 1
    while nxt < doc_end:
        end = _line_end(text, nxt, doc_end)
        line = text[nxt:end]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        last = end
        nxt = end + 1
    return (eol + 1, last) if last > eol else (eol, eol)


def _k8s_item(
    text: str, line_start: int, indent: int, doc_start: int, doc_end: int
) -> tuple[int, int]:
    """(start, end) of the list item whose mapping holds a key at column indent on the line at
    line_start: from its ``-`` line to the next line indented no more than its ``-``. The whole
    document where no such item holds that line."""
    found = None
    for item in _K8S_ITEM.finditer(text, doc_start, _line_end(text, line_start, doc_end)):
        if item.end() - item.start() == indent:
            found = item
    if found is None:
        return doc_start, doc_end
    dash = len(found.group("ind"))
    pos = _line_end(text, found.start(), doc_end) + 1
    end = doc_end
    while pos < doc_end:
        eol = _line_end(text, pos, doc_end)
        line = text[pos:eol]
        if line.strip() and len(line) - len(line.lstrip()) <= dash:
            end = pos
            break
        pos = eol + 1
    return (found.start(), end) if line_start < end else (doc_start, doc_end)


def _k8s_secret(text: str, at: int) -> list[tuple[int, int]]:
    """The value spans of the data of the Secret whose ``kind: Secret`` line holds offset at."""
    line_start = text.rfind("\n", 0, at) + 1
    kind = _K8S_KIND.fullmatch(text, line_start, _line_end(text, at, len(text)))
    if kind is None:
        return []
    doc_start = text.rfind("\n---", 0, at) + 1
    doc_end = text.find("\n---", at)
    doc_end = len(text) if doc_end < 0 else doc_end
    if kind.group("ind"):  # an item of a list (kind: List): the Secret is that item alone
        doc_start, doc_end = _k8s_item(text, line_start, len(kind.group("ind")), doc_start, doc_end)
    spans: list[tuple[int, int]] = []
    for block in _K8S_DATA.finditer(text, doc_start, doc_end):
        indent = len(block.group("ind"))
        pos = block.end() + 1
        while pos < doc_end:
            eol = _line_end(text, pos, doc_end)
            entry = _K8S_ENTRY.fullmatch(text, pos, eol)
            if entry is None or len(entry.group("ind")) <= indent:
                break
            value = entry.group("v").strip()
            if value in _K8S_BLOCK:  # a block scalar: the more indented lines after it
                start, end = _k8s_block(text, eol, len(entry.group("ind")), doc_end)
                if end > start:
                    spans.append((start, end))
                pos = max(end, eol) + 1
                continue
            unquoted = value.strip("\"'")
            if unquoted and REFERENCE.search(unquoted) is None and MARKER_PREFIX not in unquoted:
                vs = text.index(unquoted, entry.start("v"))
                spans.append((vs, vs + len(unquoted)))
            pos = eol + 1
    return spans


def with_secret_data(
    text: str, secrets_at: list[int], taken: list[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """taken, with the data of each Kubernetes Secret that no provider shape took part of."""
    extra: list[tuple[int, int, str]] = []
    for at in secrets_at:
        for start, end in _k8s_secret(text, at):
            if not any(s < end and start < e for s, e, _ in taken):
                extra.append((start, end, "kubernetes-secret"))
    return sorted(taken + extra) if extra else taken
