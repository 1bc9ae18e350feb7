"""A registered tool costs what it holds: no pydantic model until a call needs one (issue 51).

The input schema is assembled from cached per-type fragments at registration; these
tests hold it byte for byte to what the model pydantic builds later would say.
"""

import enum
import gc
import json
import tracemalloc
import warnings

import pydantic
import pydantic_core
import pytest
from pydantic import BaseModel

from fusion_nb import Fusion
from fusion_nb.engine import INVALID_INPUT


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def described(app, name):
    @(
        app.f.query(name)
        .describe("Forecast for a city.")
        .with_string("city", "The city")
        .with_integer("days", "How many days", default=3)
        .handle
    )
    async def forecast(input, ctx):
        return f"{input.city} {input.days}"

    return forecast


def model_schema(tool):
    """What registration used to derive: the built model's JSON schema, untitled, always with properties."""
    schema = tool.input_model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def models_made_by(action):
    """The pydantic model classes ``action()`` created (collection paused: a class dies only in a collection)."""
    gc.collect()
    gc.disable()
    try:
        before = set(BaseModel.__subclasses__())
        action()
        return set(BaseModel.__subclasses__()) - before
    finally:
        gc.enable()


def test_registering_tools_builds_no_pydantic_model_and_a_call_builds_one():
    app = Fusion("cost")
    tools = []
    assert models_made_by(lambda: tools.extend(described(app, f"forecast_{i}") for i in range(20))) == set()
    (model,) = models_made_by(lambda: tools[0].tool.input_model)  # the first use builds it
    assert model.__name__ == "Forecast0Input" and list(model.model_fields) == ["city", "days"]
    again = []
    assert models_made_by(lambda: again.append(described(Fusion("elsewhere"), "forecast_0").tool.input_model)) == set()
    assert again == [model]  # same name and fields: the same model


@pytest.mark.anyio
async def test_the_first_call_builds_the_model_and_validates_as_before(app):
    forecast = described(app, "forecast")
    assert await forecast(city="Paris") == "Paris 3"
    result = await app.call("forecast", {"city": 3, "days": "2", "extra": 1})
    assert result.error.code == INVALID_INPUT
    assert result.error.message == (
        'Invalid input for tool "forecast": field "city" expected a string, got 3 (int); '
        "field \"days\" expected an integer, got '2' (str); "
        'field "extra" is not accepted (known fields: city, days), got 1 (int).'
    )
    assert (await app.call("forecast", {"city": "Oslo", "days": float("nan")})).error.code == INVALID_INPUT


def test_a_registered_tool_holds_a_few_kibibytes_not_a_model():
    """tracemalloc bytes per registered described two-argument tool (a model per tool held ~14 KiB)."""
    app = Fusion("cost")
    described(app, "warm")  # caches of field types, the builder's first use
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        [described(app, f"forecast_{i}") for i in range(200)]
        gc.collect()
        held = (tracemalloc.get_traced_memory()[0] - before) / 200
    finally:
        tracemalloc.stop()
    print(f"{held:.0f} bytes per registered tool")
    assert held < 4096, f"{held:.0f} bytes per registered tool"


FIELDS = [
    ("with_string", ("name", "A name"), {}),
    ("with_string", ("job_id", None), {"default": "x"}),
    ("with_string", ("note", 'A "quoted" désc'), {"optional": True}),
    ("with_number", ("ratio", "How much"), {"default": 1}),
    ("with_number", ("xYz", None), {"optional": True}),
    ("with_integer", ("A_b2", "Count"), {"default": 3}),
    ("with_integer", ("count", None), {"optional": True, "default": 4}),
    ("with_boolean", ("flag", "On?"), {"default": False}),
    ("with_boolean", ("notify", None), {"optional": True}),
    ("with_enum", ("reason", ["duplicate", "fraud"], "Why"), {}),
    ("with_enum", ("level", [1, 2, 3]), {"default": 2}),
    ("with_enum", ("mixed", [1, "a", None, True, 2.5]), {}),
    ("with_enum", ("only", ["one"]), {"optional": True}),
    ("with_enum", ("color", [Color.RED, Color.BLUE], "A color"), {"default": Color.BLUE}),
]


@pytest.mark.parametrize("field", FIELDS, ids=[str(f[1][0]) for f in FIELDS])
def test_each_field_schema_is_the_one_the_model_gives(field):
    method, args, options = field
    app = Fusion("schemas")
    tool = getattr(app.f.action("t").describe("d"), method)(*args, **options).handle(lambda input, ctx: None)
    assert json.dumps(tool.input_schema) == json.dumps(model_schema(tool.tool))


def test_a_tool_of_every_field_and_one_of_none_have_the_schemas_the_model_gives():
    app = Fusion("schemas")
    builder = app.f.action("all.fields-at_once")
    for method, args, options in FIELDS:
        builder = getattr(builder, method)(*args, **options)
    tool = builder.handle(lambda input, ctx: None)
    none = app.f.action("none").handle(lambda input, ctx: None)
    for each in (tool, none):
        assert json.dumps(each.input_schema) == json.dumps(model_schema(each.tool))
    assert tool.tool.input_model.__name__ == "AllFieldsAtOnceInput"


def test_names_pydantic_refuses_or_warns_about_still_do_so_at_registration():
    app = Fusion("names")
    with pytest.raises(pydantic.PydanticUserError, match="leading underscores"):
        app.f.action("t").with_string("_hidden").handle(lambda input, ctx: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tool = app.f.action("t").with_string("json").handle(lambda input, ctx: None)
    assert [str(w.message) for w in caught] == [
        'Field name "json" in "TInput" shadows an attribute in parent "BaseModel"'
    ]
    assert json.dumps(tool.input_schema) == json.dumps(model_schema(tool.tool))


def test_equal_defaults_of_other_types_do_not_share_a_model():
    one = Fusion("a").f.action("t").with_enum("v", [1, True], default=1).handle(lambda input, ctx: None)
    true = Fusion("b").f.action("t").with_enum("v", [1, True], default=True).handle(lambda input, ctx: None)
    assert one.tool.input_model is not true.tool.input_model
    assert true.tool.input_model().v is True and one.tool.input_model().v == 1


def test_an_enum_value_without_a_json_form_still_fails_at_registration():
    class Opaque:
        pass

    with pytest.raises(pydantic_core.PydanticSerializationError, match="Unable to serialize unknown type"):
        Fusion("types").f.action("t").with_enum("v", [Opaque()]).handle(lambda input, ctx: None)
    sent = Fusion("types").f.action("t").with_enum("v", [b"x", 1 + 2j]).handle(lambda input, ctx: None)
    assert json.dumps(sent.input_schema) == json.dumps(model_schema(sent.tool))
