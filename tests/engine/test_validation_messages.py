"""Bad input gets one clean, bounded sentence: field, expected, sent; NaN and Infinity refused.

Validation is a pure function of the arguments, so these run on asyncio only; they go
through ``app.call`` (the public path) and check the sentence and its size.
"""

import json
import math
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fusion_nb.engine import INVALID_INPUT

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

NAN, INF = float("nan"), float("inf")


@pytest.fixture
def book(app):
    @(
        app.f.action("book")
        .with_integer("seats")
        .with_number("price", optional=True)
        .with_boolean("paid", optional=True)
        .with_string("name", optional=True)
        .with_enum("cabin", ["economy", "business"], optional=True)
        .handle
    )
    async def book(input, ctx):
        return input.seats

    return book


class Leg(BaseModel):
    km: float
    note: Annotated[str, Field(max_length=5)] = ""


class Route(BaseModel):
    name: str
    legs: Annotated[list[Leg], Field(max_length=3)] = []
    ref: int | str = 0
    scale: float = 1.0
    tags: list[int] = []
    speed: Annotated[int, Field(gt=0, le=300)] = 1
    code: Annotated[str, Field(pattern=r"^[A-Z]+$")] = "A"
    kind: Literal["road", "rail"] = "road"
    weights: dict[str, float] = {}

    @field_validator("name")
    @classmethod
    def no_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


@pytest.fixture
def route(app):
    @app.f.action("route").with_model(Route).handle
    async def route(input, ctx):
        return "ok"

    return route


async def refused(app, tool, args):
    """The INVALID_INPUT error of a call that must be refused (the handler never runs)."""
    result = await app.call(tool, args)
    assert result.is_error and result.error.code == INVALID_INPUT, result
    message = result.error.message
    assert message.startswith(f'Invalid input for tool "{tool}": ') and message.endswith(".")
    assert "\n" not in message and "Input should be" not in message and "Value error" not in message
    assert len(message) <= 1024
    assert len(json.dumps(result.error.to_dict(), ensure_ascii=False)) <= 4096
    return result.error


@pytest.mark.parametrize(
    ("args", "clause"),
    [
        ({}, 'field "seats" is required but was not sent'),
        ({"seats": 1.5}, 'field "seats" expected an integer, got 1.5 (float)'),
        ({"seats": "two"}, "field \"seats\" expected an integer, got 'two' (str)"),
        ({"seats": [2]}, 'field "seats" expected an integer, got [2] (list)'),
        ({"seats": 1, "price": "cheap"}, "field \"price\" expected a number, got 'cheap' (str)"),
        ({"seats": 1, "paid": "maybe"}, "field \"paid\" expected a boolean (true or false), got 'maybe' (str)"),
        ({"seats": 1, "name": 7}, 'field "name" expected a string, got 7 (int)'),
        ({"seats": 1, "cabin": "first"}, "field \"cabin\" expected 'economy' or 'business', got 'first' (str)"),
        (
            {"seats": 1, "sets": 2},
            'field "sets" is not accepted (known fields: seats, price, paid, name, cabin), got 2 (int)',
        ),
    ],
)
async def test_builder_fields_one_clean_clause(app, book, args, clause):
    error = await refused(app, "book", args)
    assert error.message == f'Invalid input for tool "book": {clause}.'
    assert error.details == {"errors": [clause]}


@pytest.mark.parametrize(
    ("args", "clause"),
    [
        ({"name": " "}, "field \"name\" is invalid (must not be blank), got ' ' (str)"),
        ({"name": "r", "legs": 5}, 'field "legs" expected a list, got 5 (int)'),
        ({"name": "r", "legs": [5]}, 'field "legs[0]" expected an object, got 5 (int)'),
        ({"name": "r", "legs": [{}]}, 'field "legs[0].km" is required but was not sent'),
        (
            {"name": "r", "legs": [{"km": 1, "note": "too long"}]},
            "field \"legs[0].note\" expected a string of at most 5 characters, got 'too long' (str)",
        ),
        ({"name": "r", "legs": [{"km": 1}] * 4}, 'field "legs" expected at most 3 items, got'),
        ({"name": "r", "ref": [1]}, 'field "ref" expected an integer or a string, got [1] (list)'),
        ({"name": "r", "tags": [1, "x"]}, "field \"tags[1]\" expected an integer, got 'x' (str)"),
        ({"name": "r", "speed": 0}, 'field "speed" expected a value greater than 0, got 0 (int)'),
        ({"name": "r", "speed": 301}, 'field "speed" expected at most 300, got 301 (int)'),
        (
            {"name": "r", "code": "abc"},
            "field \"code\" expected a string matching the pattern '^[A-Z]+$', got 'abc' (str)",
        ),
        ({"name": "r", "kind": "air"}, "field \"kind\" expected 'road' or 'rail', got 'air' (str)"),
        ({"name": "r", "weights": []}, 'field "weights" expected an object, got [] (list)'),
    ],
)
async def test_model_fields_one_clean_clause(app, route, args, clause):
    error = await refused(app, "route", args)
    assert len(error.details["errors"]) == 1
    assert error.details["errors"][0].startswith(clause)
    assert clause in error.message


async def test_several_fields_each_get_their_own_clause(app, route):
    error = await refused(app, "route", {"name": 5, "legs": [{"km": "x"}], "scale": "big"})
    assert error.details["errors"] == [
        'field "name" expected a string, got 5 (int)',
        "field \"legs[0].km\" expected a number, got 'x' (str)",
        "field \"scale\" expected a number, got 'big' (str)",
    ]
    assert error.message == 'Invalid input for tool "route": ' + "; ".join(error.details["errors"]) + "."


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 1e309])
async def test_nan_and_infinity_are_refused_for_builder_number_fields(app, book, bad):
    error = await refused(app, "book", {"seats": 1, "price": bad})
    clause = error.details["errors"][0]
    assert clause.startswith('field "price" expected a finite number (NaN and Infinity are not accepted), got ')


@pytest.mark.parametrize("bad", ["NaN", "inf", "-Infinity", "3", "1.5"])
async def test_builder_number_fields_take_no_strings(app, book, bad):
    error = await refused(app, "book", {"seats": 1, "price": bad})
    assert error.details["errors"][0] == f'field "price" expected a number, got {bad!r} (str)'


@pytest.mark.parametrize(("field", "bad", "expected"), [("seats", "3", "an integer"), ("seats", True, "an integer")])
async def test_builder_fields_take_only_what_their_schema_promises(app, book, field, bad, expected):
    error = await refused(app, "book", {"seats": 1, "price": 2.5, field: bad})
    assert error.details["errors"][0] == f'field "{field}" expected {expected}, got {bad!r} ({type(bad).__name__})'


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
async def test_nan_and_infinity_are_refused_for_integer_fields(app, book, bad):
    error = await refused(app, "book", {"seats": bad})
    assert error.details["errors"][0] == f'field "seats" expected an integer, got {bad!r} (float)'


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"name": "r", "scale": NAN}, "scale"),
        ({"name": "r", "scale": "Infinity"}, "scale"),
        ({"name": "r", "legs": [{"km": 1}, {"km": INF}]}, "legs[1].km"),
        ({"name": "r", "legs": [{"km": "nan"}]}, "legs[0].km"),
        ({"name": "r", "weights": {"a": 1.0, "b": -INF}}, "weights.b"),
    ],
)
async def test_nan_and_infinity_are_refused_inside_with_model_models(app, route, args, field):
    error = await refused(app, "route", args)
    (clause,) = error.details["errors"]
    assert clause.startswith(f'field "{field}" expected a finite number (NaN and Infinity are not accepted), got ')


async def test_finite_numbers_still_pass_and_an_explicit_opt_in_is_respected(app, route):
    assert (await app.call("route", {"name": "r", "scale": 2.5, "legs": [{"km": 1e300}]})).value == "ok"

    class Lenient(BaseModel):
        model_config = ConfigDict(allow_inf_nan=True)
        x: float

    class Outer(BaseModel):
        inner: Lenient

    app.f.action("lenient").with_model(Lenient).handle(lambda input, ctx: input.x)
    app.f.action("outer").with_model(Outer).handle(lambda input, ctx: input.inner.x)
    assert math.isnan((await app.call("lenient", {"x": NAN})).value)
    assert math.isinf((await app.call("outer", {"inner": {"x": INF}})).value)


async def test_a_huge_unknown_field_name_is_truncated(app, book):
    name = "z" * 200_000
    error = await refused(app, "book", {"seats": 1, name: "v" * 200_000})
    assert len(error.message) < 300
    assert '"zzzzzzzzzz' in error.message and 'zzz..." is not accepted' in error.message
    assert ", got 'vvvvvvvv" in error.message and "v... (str)." in error.message


async def test_fifty_extra_fields_give_a_bounded_message_saying_how_many_more(app, book):
    args = {"seats": 1, **{f"extra_field_{i}": i for i in range(50)}}
    error = await refused(app, "book", args)
    shown = error.details["errors"]
    assert 5 < len(shown) < 50
    assert error.details["more_errors"] == 50 - len(shown)
    assert error.message.endswith(f"; ... and {50 - len(shown)} more fields.")
    assert sum("known fields" in clause for clause in shown) == 1  # the hint once, not 50 times


async def test_thousands_of_errors_stay_bounded(app, route):
    args = {"name": "r", "tags": ["x"] * 5000, **{"k" * 1000 + str(i): "v" * 1000 for i in range(300)}}
    error = await refused(app, "route", args)
    assert error.details["more_errors"] > 5000
    assert len(json.dumps(error.details)) <= 1100


async def test_the_known_fields_hint_is_bounded(app):
    fields = app.f.action("wide")
    for i in range(200):
        fields = fields.with_string(f"field_number_{i}", optional=True)
    fields.handle(lambda input, ctx: None)
    error = await refused(app, "wide", {"nope": 1})
    (clause,) = error.details["errors"]
    assert "field_number_0, field_number_1" in clause and "more)" in clause
    assert len(clause) < 320


async def test_field_names_with_quotes_and_newlines_are_escaped(app, book):
    error = await refused(app, "book", {"seats": 1, 'a"b\nc': 1})
    assert 'field "a\\"b\\nc" is not accepted' in error.message


async def test_huge_values_are_shown_truncated_and_cheaply(app, book):
    nested = {"a": [list(range(10_000))] * 1000}
    error = await refused(app, "book", {"seats": nested})
    assert error.details["errors"][0].startswith('field "seats" expected an integer, got {')
    assert len(error.details["errors"][0]) < 140
