"""A module app for the bridge tests: tools, a prompt and a resource that ask the client (#46).

Elicitation, sampling and roots, one at a time and all in one round, plus a log line
and completion, so every kind of input request and what comes with it crosses the bridge.
"""

from fusion_nb import Fusion, ask, read_input, require_input

app = Fusion("asking-test", version="1.0.0")


@app.f.action("sample").handle
async def sample(input, ctx):
    reply = read_input("sample")
    if reply is None:
        return require_input.sample("What is the capital of France?", max_tokens=50, key="sample")
    return "model said: " + reply["content"].get("text", "")


@app.f.action("roots").handle
async def roots(input, ctx):
    found = read_input("roots")
    if found is None:
        return require_input.roots(key="roots")
    return "roots: " + ", ".join(root["uri"] for root in found["roots"])


@app.f.action("everything").interactive().handle
async def everything(input, ctx):
    if read_input("roots") is None:
        ctx.log("info", "asking three things at once")
        return require_input.all(
            require_input.elicit("Your name?", {"name": ask.string("Name")}, key="form"),
            require_input.sample("Say hello", max_tokens=20, key="sample"),
            require_input.roots(key="roots"),
        )
    roots = ", ".join(root["uri"] for root in read_input("roots")["roots"])
    return f"{read_input('name')} / {read_input('sample')['content'].get('text', '')} / {roots}"


@app.prompt("greeting", complete=lambda argument, value, context: [w for w in ("Oslo", "Lima") if w.startswith(value)])
def greeting(city: str):
    """A prompt that asks who it is for first."""
    who = read_input("who")
    if who is None:
        return require_input.elicit("Who is it for?", {"who": ask.string("Name")})
    return f"Greet {who} from {city}."


@app.resource("data://secret")
def secret():
    """A resource that asks for a password first."""
    word = read_input("password")
    if word is None:
        return require_input.elicit("Password?", {"password": ask.string("Password")})
    return f"the secret, for {word}"
