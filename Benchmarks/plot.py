#!/usr/bin/env python3
"""plot.py - turns the JSON report of notifbus-bench into a chart of latency per
hop, broker against its floor.

    notifbus-bench --broker .build/release/notifbus --json > bench.json
    python3 Benchmarks/plot.py bench.json -o bench.svg     # or .png with matplotlib

For every one-client broker row that has a floor (ping against raw ping-pong,
invoke and post chains against the libevent relay), it draws the median round
trip divided by the hops it makes (servers, handlers or observers visited; a
ping counts as one), for the floor and the broker side by side, with the p99
per hop as a whisker and the broker/floor ratio above each pair. The D-Bus peers'
one-client rows (an sd-bus method call through dbus-daemon or dbus-broker) are drawn
the same way against the relay, in their own colour. With
matplotlib installed it uses matplotlib (any format it knows); without it, it
writes the SVG by hand.
"""

import argparse
import json
import sys

COLORS = {"broker": "#2f6fb0", "dbus": "#d9822b"}
NAMES = {"broker": "notifbus broker", "dbus": "D-Bus (sd-bus via the bus)"}


def pairs(report):
    """(label, floor, measured, ratio, kind) per comparable row; floor/measured are dicts or
    None, kind is "broker" (notifbus) or "dbus" (a D-Bus peer)."""
    rows = {r["key"]: r for r in report.get("rows", [])}
    out = []
    for r in report.get("rows", []):
        if r.get("group") not in ("broker", "dbus") or r.get("clients", 1) != 1 or not r.get("floor"):
            continue
        if r.get("skipped"):
            continue
        f = rows.get(r["floor"])
        hops = max(int(r.get("hops") or 0), 1)
        unit = "per round trip" if (r.get("hops") or 0) == 0 else ("1 hop" if hops == 1 else "%d hops" % hops)

        def per_hop(row):
            if not row or not row.get("ok") or row.get("medianUs") is None:
                return None
            fh = max(int(row.get("hops") or 0), 1)
            return {
                "med": row["medianUs"] / fh,
                "p99": (row.get("p99Us") or row["medianUs"]) / fh,
                "label": row.get("label", row["key"]),
            }

        label = r.get("label", r["key"])
        if r["group"] == "dbus":  # "dbus-broker: Ping(s)->s via the bus" is too wide for a tick
            label = label.split(":")[0] + " call"
        out.append(("%s\n(%s)" % (label, unit), per_hop(f), per_hop(r), r.get("ratioMedian"), r["group"]))
    return out


def subtitle(report):
    cfg = report.get("config", {})
    parts = [
        "CPU %s, %s rounds%s" % (cfg.get("cpu", "?"), cfg.get("rounds", "?"), ", quick" if cfg.get("quick") else "")
    ]
    mem = {m["key"]: m for m in report.get("memory", [])}
    m = mem.get("bytes_per_client")
    if m and m.get("ok"):
        parts.append("%.0f B per idle client" % m["value"])
    m = mem.get("bytes_per_queued_post")
    if m and m.get("ok"):
        parts.append("%.0f B per queued post" % m["value"])
    st = report.get("startup", {})
    if st.get("medianMs") is not None:
        parts.append("start-up %.1f ms" % st["medianMs"])
    return "; ".join(parts)


def plot_matplotlib(report, data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5.5))
    width = 0.38
    top = axis_top(data) * 1.08
    named = set()
    for i, (_label, f, b, ratio, kind) in enumerate(data):
        for side, (d, color, name) in enumerate(((f, "#9aa5b1", "floor"), (b, COLORS[kind], NAMES[kind]))):
            if not d:
                continue
            x = i + (side - 0.5) * width
            ax.bar(x, d["med"], width, color=color, label=name if name not in named else None)
            named.add(name)
            ax.plot([x, x], [d["med"], d["p99"]], color="#333333", linewidth=1)
            ax.plot([x - width / 6, x + width / 6], [d["p99"], d["p99"]], color="#333333", linewidth=1)
        if ratio is not None and b:
            ax.annotate(
                "%.2f×" % ratio,
                (i + width / 2, min(b["p99"], top)),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=9,
            )
    ax.set_xticks(range(len(data)))
    ax.set_xticklabels([d[0] for d in data], fontsize=8)
    ax.set_ylim(0, top)
    ax.set_ylabel("µs per hop (median; whisker: p99, clipped at the top)")
    ax.set_title("notifbus: latency per hop against the floor\n" + subtitle(report), fontsize=10)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plot_svg(report, data, path):
    W, H = 960, 520
    left, right, top, bottom = 70, 20, 70, 90
    pw, ph = W - left - right, H - top - bottom
    ymax = axis_top(data)
    step = nice_step(ymax / 5)
    ymax = step * (int(ymax / step) + 1)

    def y(v):
        return top + ph - v / ymax * ph

    o = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
        'font-family="sans-serif" font-size="11">' % (W, H),
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="%d" y="24" font-size="15" text-anchor="middle">notifbus: latency per hop '
        "against the floor</text>" % (W // 2),
        '<text x="%d" y="44" text-anchor="middle" fill="#555">%s</text>' % (W // 2, esc(subtitle(report))),
    ]
    v = 0.0
    while v <= ymax + 1e-9:
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e3e3e3"/>' % (left, W - right, y(v), y(v)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (left - 6, y(v) + 4, round(v, 3)))
        v += step
    o.append(
        '<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">µs per hop '
        "(median; whisker: p99)</text>" % (top + ph // 2)
    )
    n = max(len(data), 1)
    gw = pw / n
    bw = gw * 0.32
    for i, (label, f, b, ratio, kind) in enumerate(data):
        cx = left + gw * (i + 0.5)
        for side, (d, color) in enumerate(((f, "#9aa5b1"), (b, COLORS[kind]))):
            x = cx + (side - 1) * bw - (2 if side == 0 else -2)
            if not d:
                o.append(
                    '<text x="%.1f" y="%.1f" text-anchor="middle" fill="#b00">failed</text>'
                    % (x + bw / 2, top + ph - 4)
                )
                continue
            o.append(
                '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">'
                "<title>%s: %.1f µs (p99 %.1f)</title></rect>"
                % (x, y(d["med"]), bw, top + ph - y(d["med"]), color, esc(d["label"]), d["med"], d["p99"])
            )
            mx = x + bw / 2
            p99 = min(d["p99"], ymax)
            o.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333"/>' % (mx, mx, y(d["med"]), y(p99)))
            if d["p99"] > ymax:  # clipped whisker: an arrow head and the value
                o.append('<path d="M%.1f %.1f l-4 7 h8 z" fill="#333"/>' % (mx, y(p99)))
                o.append('<text x="%.1f" y="%.1f" font-size="9">p99 %.0f</text>' % (mx + 5, y(p99) + 8, d["p99"]))
            else:
                o.append(
                    '<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333"/>'
                    % (mx - bw / 6, mx + bw / 6, y(p99), y(p99))
                )
            o.append(
                '<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9" fill="white">%.1f</text>'
                % (mx, top + ph - 4, d["med"])
                if top + ph - y(d["med"]) > 14
                else ""
            )
        if ratio is not None and b:
            o.append(
                '<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%.2f×</text>'
                % (cx + bw / 2 + 2, max(y(min(b["p99"], ymax)) - 6, top - 2), ratio)
            )
        for k, line in enumerate(label.split("\n")):
            o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (cx, top + ph + 18 + 14 * k, esc(line)))
    o.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>' % (left, W - right, top + ph, top + ph))
    lx = left + 12  # top left: the ping pair there is the lowest
    o.append(
        '<rect x="%d" y="%d" width="12" height="12" fill="#9aa5b1"/><text x="%d" y="%d">floor (C relay / raw)</text>'
        % (lx, top - 14, lx + 18, top - 4)
    )
    o.append(
        '<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
        % (lx, top + 4, COLORS["broker"], lx + 18, top + 14, NAMES["broker"])
    )
    if any(d[4] == "dbus" for d in data):
        o.append(
            '<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
            % (lx, top + 22, COLORS["dbus"], lx + 18, top + 32, NAMES["dbus"])
        )
    o.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(x for x in o if x) + "\n")


def axis_top(data):
    """Top of the y axis: every p99, unless an outlier would flatten the medians."""
    meds = [d["med"] for _, f, b, _, _ in data for d in (f, b) if d] or [1.0]
    p99s = [d["p99"] for _, f, b, _, _ in data for d in (f, b) if d] or [1.0]
    return max(min(max(p99s), 2.5 * max(meds)), 1.0)


def nice_step(raw):
    if raw <= 0:
        return 1.0
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 10 ** -len(str(int(1 / raw)))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", nargs="?", default="-", help="notifbus-bench --json output (default: stdin)")
    ap.add_argument("-o", "--output", default="notifbus-bench.svg", help="chart file (default: %(default)s)")
    ap.add_argument("--svg", action="store_true", help="write the SVG by hand even if matplotlib is there")
    a = ap.parse_args()
    report = json.load(sys.stdin if a.report == "-" else open(a.report))
    data = pairs(report)
    if not data:
        sys.exit("plot.py: the report has no broker row with a floor")
    use_mpl = not a.svg
    if use_mpl:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            use_mpl = False
    if use_mpl:
        plot_matplotlib(report, data, a.output)
    else:
        if not a.output.endswith(".svg"):
            sys.exit("plot.py: without matplotlib only .svg output is possible")
        plot_svg(report, data, a.output)
    print("plot.py: wrote %s (%s)" % (a.output, "matplotlib" if use_mpl else "hand-written SVG"))


if __name__ == "__main__":
    main()
