"""Job tools: a host without tasks and with a hard timeout still gets a long job's result (SPEC 10).

The SDK's real client calls a task tool plainly; with job tools on, the answer is a
job id and a sentence naming ``jobs.wait`` and ``jobs.cancel``; ``jobs.wait`` gives
the status while the job runs and its result once done; another token's client
cannot see the job; ``jobs.cancel`` aborts it and its cleanup runs.
"""

from __future__ import annotations

import re

import anyio
import pytest
from eras import client_for
from http_serving import serve
from pydantic import BaseModel

from fusion_nb import Fusion, progress, respond
from fusion_nb.engine import tasks_of
from fusion_nb.mcp import enable_job_tools, mcp_server

pytestmark = pytest.mark.anyio


def job_app() -> tuple[Fusion, anyio.Event, list[str]]:
    app, release, cleaned = Fusion("jobs-test", grace=2.0), anyio.Event(), []

    @app.f.action("simulate").with_integer("steps").task().handle
    async def simulate(input, ctx):
        try:
            yield progress(50, "halfway")
            await release.wait()
            yield respond(f"simulated {input.steps} steps")
        finally:
            cleaned.append("simulate")

    return app, release, cleaned


def job_id_in(text: str) -> str:
    found = re.search(r'job_id "([^"]+)"', text)
    assert found, text
    return found.group(1)


@pytest.mark.parametrize("era", ["2025-memory", "2026-stream"])
async def test_a_job_round_trip_started_waited_on_and_done(era):
    app, release, _ = job_app()
    enable_job_tools(app, wait=0.05)
    async with client_for(mcp_server(app), era) as client:
        started = (await client.call_tool("simulate", {"steps": 7})).content[0].text
        job_id = job_id_in(started)
        assert started == (
            f'Started job {job_id} for tool "simulate"; it keeps running after this answer. Call jobs.wait with '
            f'job_id "{job_id}" for its result (it waits up to 0 s, then reports the status: call it again until '
            "the job is done), or jobs.cancel to stop it."
        )
        running = (await client.call_tool("jobs.wait", {"job_id": job_id})).content[0].text
        assert running == f'Job {job_id} (tool "simulate") is still working: halfway. Call jobs.wait again.'
        release.set()
        tasks_of(app).job_wait = 5
        done = await client.call_tool("jobs.wait", {"job_id": job_id})
        assert done.content[0].text == "simulated 7 steps" and not done.is_error
    await app.aclose()


async def test_jobs_cancel_aborts_the_job_and_its_cleanup_runs():
    app, _, cleaned = job_app()
    enable_job_tools(app)
    async with client_for(mcp_server(app), "2025-memory") as client:
        job_id = job_id_in((await client.call_tool("simulate", {"steps": 1})).content[0].text)
        call = tasks_of(app).get(None, job_id).call
        cancelled = await client.call_tool("jobs.cancel", {"job_id": job_id})
        assert cancelled.content[0].text == f'Job {job_id} (tool "simulate") is cancelled.'
        with anyio.fail_after(1):
            await call.wait_stopped()
        assert cleaned == ["simulate"]
        after = await client.call_tool("jobs.wait", {"job_id": job_id})
        assert after.content[0].text == f'Job {job_id} (tool "simulate") was cancelled.'
        unknown = await client.call_tool("jobs.wait", {"job_id": "nope"})
        assert unknown.is_error and unknown.content[0].text.startswith(
            '[INVALID_INPUT] There is no job "nope" for this client'
        )
    await app.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_another_tokens_client_cannot_wait_on_or_cancel_a_job():
    app, release, _ = job_app()
    enable_job_tools(app)
    tokens = {"alice": "a" * 32, "bob": "b" * 32}
    async with serve(app, tokens=tokens) as served, served.client("auto", token=tokens["alice"]) as alice:
        job_id = job_id_in((await alice.call_tool("simulate", {"steps": 2})).content[0].text)
        async with served.client("auto", token=tokens["bob"]) as bob:
            for tool in ("jobs.wait", "jobs.cancel"):
                refused = await bob.call_tool(tool, {"job_id": job_id})
                assert refused.is_error and "There is no job" in refused.content[0].text
        release.set()
        assert (await alice.call_tool("jobs.wait", {"job_id": job_id})).content[0].text == "simulated 2 steps"
    await app.aclose()


def test_job_tools_are_off_by_default_and_a_flag_of_both_serve_commands():
    from fusion_nb.cli import build_parser
    from fusion_nb.notebook.magics import FusionMagics

    app, _, _ = job_app()
    assert tasks_of(app).job_wait is None and app.get("jobs.wait") is None
    assert build_parser().parse_args(["serve", "x.py", "--job-tools"]).job_tools is True
    assert "--job-tools" in FusionMagics.fusion.parser.format_help()


class Day(BaseModel):
    high: float


class Forecast(BaseModel):
    city: str
    days: list[Day]


@pytest.mark.parametrize("era", ["2025-memory", "2026-stream"])
async def test_a_tool_with_an_output_schema_answers_a_job_structured_and_its_client_validates_both_answers(era):
    app = Fusion("jobs-schema")

    @app.f.action("forecast").with_string("city").returns(Forecast).task().handle
    async def forecast(input, ctx):
        return Forecast(city=input.city, days=[Day(high=21.5)])

    enable_job_tools(app, wait=5)
    async with client_for(mcp_server(app), era) as client:  # the SDK client validates against outputSchema
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["forecast"].output_schema["anyOf"][0]["properties"]["days"]["items"] == {"$ref": "#/$defs/Day"}
        assert "Day" in listed["forecast"].output_schema["$defs"]
        started = await client.call_tool("forecast", {"city": "Oslo"})
        job_id = job_id_in(started.content[0].text)
        assert started.structured_content == {"job_id": job_id, "status": "working"} and not started.is_error
        done = await client.call_tool("jobs.wait", {"job_id": job_id})
        assert done.structured_content == {"city": "Oslo", "days": [{"high": 21.5}]}
    await app.aclose()


async def test_without_job_tools_the_output_schema_is_the_tools_own():
    app = Fusion("jobs-off-schema")

    @app.f.action("forecast").with_string("city").returns(Forecast).task().handle
    async def forecast(input, ctx):
        return Forecast(city=input.city, days=[])

    async with client_for(mcp_server(app), "2026-stream") as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.output_schema == Forecast.model_json_schema()
    await app.aclose()
