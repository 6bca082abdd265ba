"""A plain python tool the agent may call."""

frontmatter = {
    "description": "Current temperature for a city.",
    "metadata": {
        "params": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

TEMPERATURES = {"Paris": 21, "Oslo": 9}


def main(ctx):
    return {"city": ctx.args["city"], "celsius": TEMPERATURES.get(ctx.args["city"], 15)}
