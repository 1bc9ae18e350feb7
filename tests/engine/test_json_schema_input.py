"""Raw JSON Schema tool input (``with_schema``) and SEP-2243 ``header=`` fields, on asyncio and trio.

The schema reaches clients exactly as written; each call is validated against it before
the handler runs; a bad call gets one bounded sentence (field, expected, sent).
"""

import copy
import json

import pytest

from fusion_nb.engine import INTERNAL_ERROR, INVALID_INPUT

pytestmark = pytest.mark.anyio

X = "x-mcp-header"

CONTACT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@pytest.fixture
def seen():
    return []


@pytest.fixture
def contact(app, seen):
    @app.f.query("contact").with_schema(CONTACT).handle
    async def contact(input, ctx):
        seen.append(input)
        return f"{input.name} via {input.get('contactMethod', 'email')}"

    return contact


async def refused(app, tool, args):
    result = await app.call(tool, args)
    assert result.is_error and result.error.code == INVALID_INPUT, result
    message = result.error.message
    assert message.startswith(f'Invalid input for tool "{tool}": ') and message.endswith(".")
    assert "\n" not in message and len(message) <= 1024
    return message


async def test_the_schema_is_listed_as_given_and_later_changes_do_not_reach_it(app):
    schema = copy.deepcopy(CONTACT)
    tool = app.f.query("contact").with_schema(schema).handle(lambda input, ctx: "ok")
    schema["properties"]["name"]["type"] = "integer"
    assert tool.input_schema == CONTACT  # $schema, $defs, $anchor, $ref, allOf, if/then/else kept


async def test_a_valid_call_reaches_the_handler_with_its_arguments(app, contact, seen):
    args = {"name": "Ada", "contactMethod": "phone", "phone": "123", "address": {"city": "Paris"}}
    assert await contact(**args) == "Ada via phone"
    (got,) = seen
    assert got == args and got["name"] == got.name == "Ada" and got.address == {"city": "Paris"}
    with pytest.raises(AttributeError, match="no argument 'email'"):
        _ = got.email


@pytest.mark.parametrize(
    ("args", "clause"),
    [
        ({"name": 7, "email": "e"}, 'field "name" expected a string, got 7 (int)'),
        ({"name": "", "email": "e"}, "field \"name\" expected a string of at least 1 characters, got '' (str)"),
        ({"name": "a", "email": "e", "address": {"street": 3}}, 'field "address.street" expected a string, got 3'),
        (
            {"name": "a", "email": "e", "contactMethod": "fax"},
            "field \"contactMethod\" expected one of 'phone', 'email'",
        ),
        ({"name": "a", "email": "e", "nick": "x"}, 'field "nick" is not accepted (known fields: name, address,'),
        ({"name": "a", "contactMethod": "phone", "email": "e"}, 'field "phone" is required but was not sent'),
        ({"name": "a"}, 'field "(input)" expected the field "phone" or the field "email", got'),
    ],
)
async def test_a_bad_call_gets_one_clause_per_problem_and_never_runs(app, contact, seen, args, clause):
    assert clause in await refused(app, "contact", args)
    assert seen == []


async def test_many_problems_stay_bounded(app, contact):
    message = await refused(app, "contact", {f"extra{i}" * 20: "x" * 10_000 for i in range(500)})
    assert "more fields" in message


async def test_nan_is_refused_though_json_schema_numbers_allow_it(app):
    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    app.f.query("num").with_schema(schema).handle(lambda input, ctx: input.x)
    assert 'field "x" expected a finite number' in await refused(app, "num", {"x": float("nan")})


async def test_a_schema_that_is_not_usable_fails_the_call_in_one_sentence_naming_the_author(app):
    app.f.query("broken").with_schema({"type": "object", "properties": {"x": {"type": 5}}}).handle(lambda i, c: 1)
    app.f.query("remote").with_schema(
        {"type": "object", "properties": {"x": {"$ref": "https://example.invalid/x.json"}}}
    ).handle(lambda i, c: 1)
    for name in ("broken", "remote"):
        result = await app.call(name, {"x": 1})
        assert result.is_error and result.error.code == INTERNAL_ERROR
        assert result.error.message.startswith(f'Tool "{name}" cannot check its input: its JSON Schema is not usable')
        assert len(result.error.message) < 400


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ([], "takes a JSON Schema object"),
        ({"type": "array"}, '"type": "object"'),
        ({"type": "object", "default": float("nan")}, "JSON values only"),
        (
            {"type": "object", "properties": {"r": {"type": "number", "x-mcp-header": "R"}}},
            "string, integer or boolean",
        ),
        ({"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "a b"}}}, "header name token"),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "R"},
                    "b": {"type": "string", "x-mcp-header": "r"},
                },
            },
            'repeats that of "a"',
        ),
    ],
)
async def test_a_bad_schema_is_refused_at_registration(app, schema, problem):
    with pytest.raises(ValueError, match="with_schema") as raised:
        app.f.query("bad").with_schema(schema)
    assert problem in str(raised.value)


async def test_with_schema_excludes_fields_and_models(app):
    with pytest.raises(ValueError, match="already"):
        app.f.query("a").with_string("x").with_schema({"type": "object"})
    with pytest.raises(ValueError, match="with_schema"):
        app.f.query("b").with_schema({"type": "object"}).with_string("x")


def test_registering_compiles_nothing():
    """The validator is made by the first call: registration only copies and checks the schema."""
    import subprocess
    import sys

    code = (
        "import sys; from fusion_nb import Fusion; app = Fusion('t');"
        "app.f.query('c').with_schema({'type': 'object'}).handle(lambda i, c: 1);"
        "print('jsonschema' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


async def test_header_fields_carry_x_mcp_header_and_still_validate(app):
    @(
        app.f.query("routed")
        .with_string("region", header="Region")
        .with_integer("priority", default=1, header="Priority")
        .with_enum("tier", ["a", "b"], default="a", header="Tier")
        .with_string("query", optional=True)
        .handle
    )
    async def routed(input, ctx):
        return f"{input.region}/{input.priority}/{input.tier}"

    properties = routed.input_schema["properties"]
    assert {key: p.get("x-mcp-header") for key, p in properties.items()} == {
        "region": "Region",
        "priority": "Priority",
        "tier": "Tier",
        "query": None,
    }
    assert json.dumps(routed.input_schema)  # still JSON
    assert await routed(region="eu") == "eu/1/a"
    assert 'field "priority" expected an integer' in await refused(app, "routed", {"region": "eu", "priority": "x"})


async def test_bad_header_fields_are_refused_at_registration(app):
    with pytest.raises(ValueError, match="cannot be optional"):
        app.f.query("a").with_string("region", optional=True, header="Region")
    with pytest.raises(ValueError, match="header name token"):
        app.f.query("b").with_string("region", header="My Region").handle(lambda i, c: 1)
    with pytest.raises(ValueError, match="repeats"):
        app.f.query("c").with_string("a", header="X").with_string("b", header="x").handle(lambda i, c: 1)
    assert app.tools == []
