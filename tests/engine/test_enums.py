"""Verbs, handler kinds and statuses are enums where code compares them; their wire text is unchanged."""

from __future__ import annotations

import json

from fusion_nb.widgets.status import LOOKS

from fusion_nb import Fusion
from fusion_nb.engine import CallStatus, HandlerKind, Verb


def test_a_tools_verb_and_kind_are_enums_that_read_as_before():
    app = Fusion("enums")

    async def fetch(input, ctx):
        return 1

    def wipe(input, ctx):
        yield

    query, mutation = app.f.query("fetch").handle(fetch), app.f.mutation("wipe").handle(wipe)
    assert (query.verb, query.kind) == (Verb.QUERY, HandlerKind.ASYNC)
    assert (mutation.verb, mutation.kind) == (Verb.MUTATION, HandlerKind.SYNC_GEN)
    assert type(query.verb) is Verb and type(mutation.kind) is HandlerKind
    assert json.dumps([mutation.verb, mutation.kind]) == '["mutation", "sync_gen"]'
    assert f"{query.verb} {query.kind}" == "query async" and repr(mutation) == "<Tool 'wipe' (mutation, sync_gen)>"


def test_every_status_has_its_look_keyed_by_the_enum():
    statuses = [key for key in LOOKS if key != "declined"]
    assert set(statuses) == set(CallStatus) and all(type(key) is CallStatus for key in statuses)
