"""Media: a tool that returns an image, and a prompt that places one where it stands."""

import anyio

from orchestrator import Manager
from orchestrator.mediaparts import described, is_media


async def main() -> None:
    manager = Manager(paths=["tools"])
    chart = await manager.invoke("chart", {"values": [3, 5, 2]})
    print("chart:", described(chart))  # a media part: {type: media, kind, media_type, data (base64), name}
    card = await manager.invoke("card", {"title": "Sales by month", "picture": chart})  # a part is media too
    for piece in card:  # without a model, a template that places media returns its text and parts in order
        print("card:", f"[{described(piece)}]" if is_media(piece) else repr(piece))


if __name__ == "__main__":
    anyio.run(main)
