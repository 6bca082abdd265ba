"""A tool whose body fails in two ways: an unknown item, and a service that is down."""

frontmatter = {
    "description": "The price of an item, from a (pretend) price service.",
    "metadata": {
        "params": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
        # Two error handlers as an onion around execute: report-errors outside, recover inside.
        "report-errors": {},
        "recover": {"error": "LookupError", "value": "price unknown"},
        "$order": {
            "report-errors": {"after": ["$pre-execute"], "before": ["recover"]},
            "recover": {"after": ["$pre-execute"], "before": ["execute"]},
        },
    },
}

PRICES = {"tea": 3, "cake": 5}


def main(ctx):
    item = ctx.args["item"]
    if item == "coffee":
        raise ConnectionError("the price service is down")
    if item not in PRICES:
        raise LookupError(f"no price for {item!r}")
    return f"{item}: {PRICES[item]} EUR"
