"""Which files are read with the checking float parser (``gymcurric.datapacks._jsonfiles``)."""

from __future__ import annotations

import hashlib
import json
import math
import random

import pytest

from gymcurric.datapacks import load_datapacks
from gymcurric.datapacks._jsonfiles import raw_records

from .packs import record

#: separators ``str.splitlines`` splits a JSONL file's lines on
_LINE_BREAKS = ["\n", "\r\n", "\r", "\u2028", "\u2029", "\x1c", "\x85", "\x0b", "\x0c"]
_CONTEXTS = [
    '{{"a": {}}}',
    '{{"a":{}}}',
    "[{}]",
    "[1,{}]",
    "[ 1 ,\t{} ]",
    '{{"a":\n\t{}\r\n}}',
    "{}",
]


def _literal(rng: random.Random) -> str:
    """A JSON number literal, most near where a float stops (210+ digits, an exponent of 3)."""
    digits = rng.choice([1, 2, 3, 9, 200, 208, 209, 210, 211, 300, 308, 309, 310, 400])
    text = (
        rng.choice(["", "-"])
        + rng.choice("123456789")
        + "".join(rng.choice("0123456789") for _ in range(digits - 1))
    )
    if rng.random() < 0.05:
        text = text[: text.startswith("-")] + "0"  # JSON's zero: no other leading zero
    if rng.random() < 0.5:
        text += "." + "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 3, 320])))
    if rng.random() < 0.8:
        value = rng.choice([0, 1, 9, 90, 98, 99, 100, 101, 200, 290, 299, 307, 308, 309, 400, 5000])
        zeros = "0" * rng.choice([0, 0, 1, 2, 4])
        text += rng.choice("eE") + rng.choice(["", "+", "-"]) + zeros + str(value)
    return text


def _reads_as_inf(line: str) -> bool:
    """Whether ``json`` reads a number of ``line`` (a whole JSON document) as +-inf."""
    found: list[float] = []
    json.loads(line, parse_float=lambda s: found.append(float(s)) or 0.0)
    return any(math.isinf(x) for x in found)


def test_every_literal_a_float_cannot_hold_is_caught_wherever_json_reads_it(tmp_path):
    # property: the per-file pre-check that picks the checking parser must never miss one (a
    # false alarm only costs speed); generated literals in every place a JSON value can stand
    rng = random.Random(20261128)
    caught = 0
    for i in range(1500):
        literal = _literal(rng)
        doc = rng.choice(_CONTEXTS).format(literal)
        suffix = rng.choice([".json", ".jsonl"])
        if suffix == ".jsonl" and (rng.random() < 0.5 or "\n" in doc):  # one ending a line
            doc = rng.choice(['{"a": 1}', "2"]) + rng.choice(_LINE_BREAKS) + literal
        lines = doc.splitlines() if suffix == ".jsonl" else [doc]
        if not any(_reads_as_inf(line) for line in lines):
            continue
        f = tmp_path / f"x{i}{suffix}"
        f.write_text(doc, encoding="utf-8", newline="")
        problems = [r.problem for r in raw_records(f)]
        assert any("a number too large for a float" in str(p) for p in problems), (literal, doc)
        caught += 1
    assert caught > 300  # the generator reaches the edge often


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_hex_digests_keep_the_fast_float_parser(tmp_path, monkeypatch):
    # a sha256 digest holds e followed by 3 digits (3e581) in 1 of ~20 records: the pre-check
    # matched it inside the string, so such a file (every file of 10k records) lost json's own
    # float parser (cProfile, 10,000 records: 3,530,067 -> 3,330,066 calls, 100,000 parse_float)
    parsers = []

    class Recording(json.JSONDecoder):
        def __init__(self, *args, **kwargs):
            parsers.append(kwargs.get("parse_float"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(json, "JSONDecoder", Recording)
    digests = ["12e345" + _sha("a")[6:], "ab3e581" + _sha("b")[7:], "9" * 210 + "e400"]
    assert all(len(d) >= 64 for d in digests)
    rows = [
        record(f"p{i}", extra_sha256=d, task_params={"sha256": d}) for i, d in enumerate(digests)
    ]
    f = tmp_path / "x.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert len(load_datapacks(f)) == 3
    assert parsers == [None]  # json's own
    g = tmp_path / "y.jsonl"  # and a number past a float beside them is still caught
    g.write_text(f.read_text() + json.dumps(record("q", mpl_gain="X")).replace('"X"', "1e0400"))
    with pytest.raises(Exception, match=r"y\.jsonl, line 4: field 'mpl_gain': a number too large"):
        load_datapacks(g)
