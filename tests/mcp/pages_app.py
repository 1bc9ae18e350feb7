"""An app with lists longer than a page: 25 tools, 12 resources, 12 templates, 12 prompts (``test_pages``)."""

from fusion_nb import Fusion

app = Fusion("pages-test")


def register(app: Fusion, tools: int = 25, others: int = 12) -> Fusion:
    """Add ``tools`` described two-argument tools and ``others`` resources, templates and prompts."""

    async def handle(input, ctx):
        return f"{input.a}{input.b}"

    for n in range(tools):
        app.f.query(f"tool{n:03}").describe(f"Tool number {n}.").with_string("a", "text").with_integer("b", "n").handle(
            handle
        )
    for n in range(others):
        app.resource(f"data://r{n:03}", f"value {n}")
        app.resource(f"data://t{n:03}/{{name}}")(lambda name: name)
        app.prompt(f"prompt{n:03}", f"Say {n} about {{topic}}.")
    return app


register(app)
