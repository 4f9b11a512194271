"""Server-side SVG: the top-1 score distribution of one language with its floor drawn. No
script, no CDN; the page inlines the markup."""

from __future__ import annotations

from html import escape

from .stats import Histogram

WIDTH, HEIGHT = 560, 220  # SVG user units; the page scales it to the screen's width
_LEFT, _RIGHT, _TOP, _BOTTOM = 40, 26, 24, 34


def score_histogram_svg(lang: str, hist: Histogram, floor: float | None) -> str:
    """An SVG bar chart of ``hist`` (bars below the floor grey, at or above it green) with a
    red dashed line at ``floor`` and its value; ``lang`` titles it."""
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    n_max = max(hist.counts) or 1

    def x_of(score: float) -> float:
        return _LEFT + (score - hist.lo) / (hist.hi - hist.lo) * plot_w

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'role="img" class="chart" aria-label="top-1 scores, {escape(lang)}">',
             f'<title>Top-1 scores ({escape(lang)}), n={sum(hist.counts)}</title>',
             f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" '
             f'y2="{_TOP + plot_h}" stroke="#555"/>',
             f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" stroke="#555"/>',
             f'<text x="{_LEFT - 6}" y="{_TOP + 4}" text-anchor="end" class="tick">{n_max}</text>',
             f'<text x="{_LEFT - 6}" y="{_TOP + plot_h}" text-anchor="end" class="tick">0</text>']
    for i, n in enumerate(hist.counts):
        if n == 0:
            continue
        left = hist.lo + i * hist.width
        h = n / n_max * plot_h
        is_above = floor is None or left + hist.width / 2 >= floor
        parts.append(
            f'<rect x="{x_of(left) + 1:.1f}" y="{_TOP + plot_h - h:.1f}" '
            f'width="{max(1.0, plot_w / len(hist.counts) - 2):.1f}" height="{h:.1f}" '
            f'fill="{"#2e8b57" if is_above else "#9aa0a6"}"><title>{left:.3f}-'
            f'{left + hist.width:.3f}: {n}</title></rect>')
    for k in range(5):
        score = hist.lo + k * (hist.hi - hist.lo) / 4
        parts.append(f'<text x="{x_of(score):.1f}" y="{HEIGHT - 16}" text-anchor="middle" '
                     f'class="tick">{score:.2f}</text>')
    parts.append(f'<text x="{_LEFT + plot_w / 2:.1f}" y="{HEIGHT - 2}" text-anchor="middle" '
                 'class="tick">top-1 cosine</text>')
    if floor is not None:
        x = x_of(floor)
        parts.append(f'<line x1="{x:.1f}" y1="{_TOP - 6}" x2="{x:.1f}" y2="{_TOP + plot_h}" '
                     'stroke="#c0392b" stroke-width="2" stroke-dasharray="5,3"/>')
        parts.append(f'<text x="{x + 4:.1f}" y="{_TOP - 10}" class="floor">floor '
                     f'{floor:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)
