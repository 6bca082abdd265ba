"""chart: draws a bar chart of `values` as a PNG and returns it as an image (a media part)."""

import struct
import zlib

from orchestrator.agent.media import media_part

frontmatter = {
    "description": "Draws a bar chart of some numbers as a PNG image.",
    "metadata": {
        "params": {
            "type": "object",
            "properties": {"values": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 20}}},
            "required": ["values"],
        },
    },
}


def main(ctx):
    values = ctx.args["values"]
    width, height = 8 * len(values), 4 * max(values, default=1) or 4
    rows = []
    for y in range(height):
        line = bytes(0 if height - y <= 4 * values[x // 8] and x % 8 < 6 else 255 for x in range(width))
        rows.append(b"\x00" + line)  # each scanline starts with its filter type: none
    return media_part(png(width, height, b"".join(rows)), name="chart.png")


def png(width: int, height: int, pixels: bytes) -> bytes:
    """A grayscale PNG: the signature, then the IHDR, IDAT and IEND chunks."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b"")
