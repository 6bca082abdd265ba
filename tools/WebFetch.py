"""WebFetch: Claude Code's WebFetch tool. Fetches a web page and returns it as readable text.

Args as Claude Code's: ``url`` (http or https) and ``prompt`` (what to take
from the page). HTML becomes Markdown-like text (headings, lists, links,
code); other text comes as it is; the result is bounded to 30,000
characters. It needs the ``web`` grant (``host-trust: {web: true}`` on the
agent, from a program or a trusted file) and, by default, an approver's yes
for each call. Loopback, private and link-local addresses need
``private-web: true`` as well. A file that lists ``WebFetch(domain:x.org)``
narrows it to that host. Unlike Claude Code, no second model reads the page:
the text comes back with the prompt, for the calling agent's own model to
apply; ``http`` is not upgraded to ``https``, and nothing is cached (add the
``cache`` middleware for that). A redirect to another host is not followed:
the answer names it, to fetch with a new call, as Claude Code does.
"""

from orchestrator import InvocationError, SecurityError
from orchestrator.hosttools import bounded, domain_allowed, grant, permit, rules

frontmatter = {
    "description": (
        "Fetches a URL (http or https) and returns the page as Markdown text, headed by the prompt saying what to "
        "take from it. A redirect to another host is named, not followed."
    ),
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "url": {"type": "string", "format": "uri", "description": "The URL to fetch."},
                "prompt": {"type": "string", "description": "What to find in or take from the fetched page."},
            },
            "required": ["url", "prompt"],
            "additionalProperties": False,
        },
    },
}


def _narrowed(ctx, url):
    """Refuse a host that the file's ``WebFetch(domain:...)`` patterns do not allow."""
    from orchestrator.webpages import check_url  # http.client and ssl load when a page is fetched, not listed

    patterns = rules(ctx, "WebFetch")
    host = check_url(url).hostname or ""
    if patterns is not None and not domain_allowed(host, patterns):
        shown = ", ".join(f"WebFetch({p})" for p in patterns)
        raise SecurityError(
            f"url: {host!r} is not allowed: this agent may fetch only {shown}", tool=ctx.tool.name, key="url"
        )


async def main(ctx):
    from orchestrator.webpages import fetch, readable

    _narrowed(ctx, ctx.args["url"])
    await permit(ctx, "web", f"fetches {ctx.args['url'][:200]}")
    url = ctx.args["url"]  # an approver may have edited it: check it again
    _narrowed(ctx, url)
    granted, _ = grant(ctx)
    page = await fetch(url, private=granted.get("private-web") is True)
    if page.redirect is not None:
        return (
            f"{url} redirects to another host: {page.redirect}\n"
            "It was not followed. To read it, call WebFetch again with that URL and the same prompt."
        )
    if not 200 <= page.status < 300:
        raise InvocationError(
            f"url: {page.url[:200]} answered HTTP {page.status} {page.reason}", tool=ctx.tool.name, key="url"
        )
    text = readable(page)
    cut = "\n[the page is longer: only its first 5,000,000 bytes were read]" if page.truncated else ""
    head = f"Content of {page.url}" + (f" (redirected from {url})" if page.url != url else "")
    return bounded(f"{head}, for the prompt: {ctx.args['prompt']}\n\n{text}") + cut
