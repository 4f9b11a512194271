"""Draw the web page's ``favicon.ico`` (bot/web/static/) from the shapes of its ``favicon.svg``:
a blue speech bubble with a white question mark, at 32×32 and 16×16. Run once after changing
the drawing; the ICO is committed (the server does not need Pillow):

    python3 scripts/make_favicon.py
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parents[1] / "bot" / "web" / "static" / "favicon.ico"
BLUE = "#2a5db0"  # the page's --accent


def main() -> None:
    image = Image.new("RGBA", (256, 256), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((8, 8, 248, 200), radius=48, fill=BLUE)
    draw.polygon([(64, 196), (64, 248), (128, 196)], fill=BLUE)
    draw.arc((92, 44, 164, 116), start=180, end=100, fill="white", width=24)
    draw.line((134, 112, 128, 140), fill="white", width=24)
    draw.ellipse((114, 158, 142, 186), fill="white")
    image.save(OUT, format="ICO", sizes=[(32, 32), (16, 16)])
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
