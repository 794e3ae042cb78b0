"""Cassettes that are not quite cassettes: each is listed as unreadable, with why, never raised."""

from __future__ import annotations

import pytest

from tooltap.addon.audit.cassettes import cassette_items


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("hello: world\n", "it has no 'interactions'"),
        ("- 1\n", "argument of type 'int' is not iterable"),
        ("[]\n", "list indices must be integers or slices, not str"),
        ("interactions: {a: 1}\n", "string indices must be integers, not 'str'"),
        ("interactions: [1, 2]\n", "'int' object is not subscriptable"),
        ("interactions: [{request: 5, response: {}}]\n", "must be a mapping, not int"),
        ("interactions: [\n", "while parsing a flow node"),
        ("- request: {uri: x}\n", "older version of VCR"),
        ("!!python/object/apply:os.system [echo]\n", "could not determine a constructor"),
    ],
)
def test_a_file_that_is_not_a_cassette_is_one_unreadable_item(tmp_path, text, why):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    (item,) = cassette_items(path)
    assert item.exchange is None and item.source == str(path)
    assert item.unreadable is not None and item.unreadable.startswith("not a VCR cassette: ")
    assert why in item.unreadable


def test_an_interaction_missing_its_status_is_listed_and_the_others_are_read(tmp_path):
    request = "{method: POST, uri: 'https://api.openai.com/v1/responses', body: '{}', headers: {}}"
    good = "{status: {code: 200, message: OK}, headers: {}, body: {string: '{}'}}"
    path = tmp_path / "c.yaml"
    path.write_text(
        "version: 1\ninteractions:\n"
        f"- request: {request}\n  response: {{}}\n"
        f"- request: {request}\n  response: {good}\n"
    )
    broken, read = cassette_items(path)
    assert (broken.line, broken.unreadable) == (
        3,
        "interaction 1 cannot be rebuilt: it has no 'status'",
    )
    assert read.exchange is not None and read.line == 5 and read.exchange.status == 200


def test_a_json_cassette_is_read_with_the_line_each_interaction_starts_at(tmp_path):
    from vcr.serializers import jsonserializer

    interaction = {
        "request": {
            "method": "POST",
            "uri": "https://api.openai.com/v1/chat/completions",
            "body": '{"model": "gpt-4o", "messages": []}',
            "headers": {"content-type": ["application/json"]},
        },
        "response": {
            "status": {"code": 200, "message": "OK"},
            "headers": {"content-type": ["application/json"]},
            "body": {"string": '{"id": "chatcmpl-1", "model": "gpt-4o", "choices": []}'},
        },
    }
    path = tmp_path / "c.json"
    path.write_text(jsonserializer.serialize({"version": 1, "interactions": [interaction] * 3}))
    items = list(cassette_items(path))
    lines = path.read_text().splitlines()
    assert [i.exchange is not None for i in items] == [True, True, True]
    assert [lines[i.line - 1].strip() for i in items] == ["{", "{", "{"]
    assert len({i.line for i in items}) == 3
