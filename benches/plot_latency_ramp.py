#!/usr/bin/env python3
"""Draws benches/latency_ramp.sh's table as an SVG: one panel per percentile (p50, p99,
p99.9), latency in ms on a log scale against the offered rate, one line per server. Plain
Python writing SVG, so the plot needs nothing installed.

    benches/plot_latency_ramp.py RAMP.tsv OUT.svg
"""

import csv
import math
import sys

PANELS = [("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")]
COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
PANEL_W, PANEL_H, MARGIN_L, MARGIN_B, MARGIN_T, GAP = 300, 260, 60, 50, 40, 60


def read(path):
    """Rows by server, in file order: [(offered rate, {column: value}), ...]."""
    series = {}
    with open(path, newline="") as table:
        for row in csv.DictReader(table, delimiter="\t"):
            series.setdefault(row["server"], []).append((float(row["rate"]), row))
    return series


def ticks_log(low, high):
    """Powers of ten (and their 2x, 5x) spanning low..high."""
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if low <= value <= high:
                ticks.append(value)
    return ticks


def label(value):
    return f"{value:g}"


def main():
    tsv, svg = sys.argv[1], sys.argv[2]
    series = read(tsv)
    rates = [rate for rows in series.values() for rate, _ in rows]
    latencies = [
        float(row[column])
        for rows in series.values()
        for _, row in rows
        for column, _ in PANELS
        if float(row[column]) > 0
    ]
    x_low, x_high = 0.0, max(rates) * 1.05
    y_low = 10 ** math.floor(math.log10(min(latencies)))
    y_high = 10 ** math.ceil(math.log10(max(latencies)))
    width = MARGIN_L + len(PANELS) * (PANEL_W + GAP) + 20
    height = MARGIN_T + PANEL_H + MARGIN_B + 20 * len(series) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]

    def x_of(rate, left):
        return left + (rate - x_low) / (x_high - x_low) * PANEL_W

    def y_of(ms):
        ms = max(ms, y_low)
        span = math.log10(y_high) - math.log10(y_low)
        return MARGIN_T + PANEL_H - (math.log10(ms) - math.log10(y_low)) / span * PANEL_H

    for index, (column, title) in enumerate(PANELS):
        left = MARGIN_L + index * (PANEL_W + GAP)
        out.append(
            f'<text x="{left + PANEL_W / 2}" y="{MARGIN_T - 12}" text-anchor="middle" '
            f'font-size="13">{title} latency (ms)</text>'
        )
        out.append(
            f'<rect x="{left}" y="{MARGIN_T}" width="{PANEL_W}" height="{PANEL_H}" '
            'fill="none" stroke="black"/>'
        )
        for tick in ticks_log(y_low, y_high):
            y = y_of(tick)
            out.append(f'<line x1="{left}" x2="{left + PANEL_W}" y1="{y}" y2="{y}" stroke="#ddd"/>')
            out.append(f'<text x="{left - 4}" y="{y + 4}" text-anchor="end">{label(tick)}</text>')
        step = 10 ** math.floor(math.log10(x_high / 2))
        tick = step
        while tick < x_high:
            x = x_of(tick, left)
            out.append(
                f'<line x1="{x}" x2="{x}" y1="{MARGIN_T + PANEL_H}" y2="{MARGIN_T + PANEL_H + 4}" '
                'stroke="black"/>'
            )
            out.append(
                f'<text x="{x}" y="{MARGIN_T + PANEL_H + 16}" text-anchor="middle">{label(tick / 1000)}k</text>'
            )
            tick += step if x_high / step < 12 else 2 * step
        out.append(
            f'<text x="{left + PANEL_W / 2}" y="{MARGIN_T + PANEL_H + 34}" text-anchor="middle">'
            "offered rate (requests/s)</text>"
        )
        for colour, (server, rows) in zip(COLOURS, series.items()):
            points = " ".join(f"{x_of(rate, left):.1f},{y_of(float(row[column])):.1f}" for rate, row in rows)
            out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
            for rate, row in rows:
                failed = int(row["errors"]) > 0
                out.append(
                    f'<circle cx="{x_of(rate, left):.1f}" cy="{y_of(float(row[column])):.1f}" r="3" '
                    f'fill="{"white" if failed else colour}" stroke="{colour}"/>'
                )
    legend_y = MARGIN_T + PANEL_H + MARGIN_B + 6
    for index, (colour, server) in enumerate(zip(COLOURS, series)):
        y = legend_y + 20 * index
        out.append(f'<line x1="{MARGIN_L}" x2="{MARGIN_L + 24}" y1="{y}" y2="{y}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{MARGIN_L + 30}" y="{y + 4}">{server}</text>')
    out.append(
        f'<text x="{MARGIN_L + 200}" y="{legend_y + 4}">open circle: the step had errors '
        "(the ramp stops there)</text>"
    )
    out.append("</svg>")
    with open(svg, "w") as picture:
        picture.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
