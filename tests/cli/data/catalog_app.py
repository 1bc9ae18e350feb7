"""A module app for the bridge tests: instructions, a tool, resources (a value and a template) and a prompt."""

from fusion_nb import Fusion, ask, read_input, require_input

app = Fusion("catalog-test", version="7.1.0", instructions="Ask for the weather by city.")


@app.f.query("echo").with_string("text", "Text to echo").handle
async def echo(input, ctx):
    return {"text": input.text}


app.resource("data://cities", ["Oslo", "Lima"], description="The cities this server knows.")


@app.resource("data://weather/{city}")
def weather(city):
    """The weather in one city."""
    return f"sunny in {city}"


app.prompt("forecast", "Write a forecast for {city}.", description="A forecast prompt.")


@app.prompt("briefing", description="A briefing for the region the person names.")
def briefing():
    region = read_input("region")
    if region is None:
        return require_input.elicit("Which region?", {"region": ask.string("Region")})
    return f"Brief me on {region}."
