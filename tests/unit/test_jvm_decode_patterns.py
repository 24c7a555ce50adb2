"""The JVM decoder's string patterns, rewritten for speed, match exactly what the plain ones did.

The string literal is written as runs of plain characters between escapes
(Java's engine takes a run in one step); Python's ``re`` has the same
possessive quantifiers, so the spans both forms find can be compared here
without a JVM.
"""
from __future__ import annotations

import re

from hypothesis import given, strategies as st

from notify_transport.pipeline import decode

#: the string literal as one alternative per character, before the rewrite
PLAIN_LITERAL = r'"(?:[^"\\]|\\.)*+"'
PLAIN_V2 = r'^\{"oslo\.version": "2\.0", "oslo\.message": "(?:[^"\\]|\\.)*+"\}\Z'
#: the rewritten envelope pattern with Java's end of input in Python's spelling
V2 = decode._V2_ENVELOPE.replace(r"\z", r"\Z")

texts = st.text(alphabet=st.sampled_from(['"', "\\", "a", " ", "\n", "é", "{", "}"]), max_size=40)


@given(texts)
def test_the_string_literal_finds_the_same_spans(text: str) -> None:
    spans = [m.span() for m in re.finditer(PLAIN_LITERAL, text)]
    assert [m.span() for m in re.finditer(decode._STRING_LITERAL, text)] == spans


@given(texts)
def test_the_v2_envelope_matches_the_same_texts(body: str) -> None:
    text = '{"oslo.version": "2.0", "oslo.message": "' + body + '"}'
    assert bool(re.search(V2, text)) == bool(re.search(PLAIN_V2, text))


def test_a_v2_envelope_with_escapes_matches_and_one_with_text_after_it_does_not() -> None:
    assert re.search(V2, '{"oslo.version": "2.0", "oslo.message": "{\\"a\\": \\"b\\\\\\"\\"}"}')
    assert not re.search(V2, '{"oslo.version": "2.0", "oslo.message": "{}"} ')
    assert not re.search(V2, '{"oslo.version": "2.0", "oslo.message": "{}", "x": 1}')


def test_each_python_only_check_is_a_scan_of_its_own() -> None:
    assert isinstance(decode._PYTHON_ONLY, tuple) and len(decode._PYTHON_ONLY) == 5
    hits = [p for p in decode._PYTHON_ONLY if re.search(p, '{"payload": "text", "n": 1e5}')]
    assert hits == [r'[:,\[]\s*-?[0-9.]+[eE]', r'"payload":\s*"']
