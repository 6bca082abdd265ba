"""prompty: render a Prompty file's mustache templates, and give a model-less chat prompty its messages.

Added by the Prompty adapter (orchestrator/formats/prompty.py) to every tool
it reads: `prompty: {template: jinja2|mustache, api: chat|completion}`.
"""

from orchestrator.formats.prompty import prepare

frontmatter = {
    "role": "middleware",
    "description": "Renders mustache Prompty templates (chevron) and returns a model-less chat prompty's messages.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "template": {"enum": ["jinja2", "mustache"], "default": "jinja2"},
                "api": {"enum": ["chat", "completion"], "default": "chat"},
            },
            "additionalProperties": False,
        },
    },
}


async def main(ctx):
    return await prepare(ctx)
