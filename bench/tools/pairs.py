"""The paired-runs report of bench/fastpath.sh and bench/attach.sh.

Both scripts run two setups back to back, many times (`SETUP.TEST.RUN.json` files of
`lagctl lab --json` in one work directory), and report each test's medians, the ratio of the
medians, and the pairs' own ratios (second setup / first): their median, their quartiles and how
many reach the test's goal; then every run in order.
"""

import json
import os
import statistics


def value(work, setup, test, run):
    """A run's figure: datagrams/s for the UDP tests, Gbit/s otherwise; None if it failed."""
    path = os.path.join(work, f"{setup}.{test}.{run}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        d = json.load(f)
    return d["udp_pps"] if test.startswith("udp") else d["aggregate_gbps"]


def quartiles(xs):
    """The first and third quartiles (the extremes below four values)."""
    if len(xs) < 4:
        return min(xs), max(xs)
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def num(x, unit):
    """A figure as the tables print it."""
    return f"{x:,.0f}" if unit == "datagrams/s" else f"{x:.2f}"


def pair_tables(work, runs, tests, first, second, goal_column):
    """The summary rows and the per-run rows for `tests` [(key, label, unit, goal)], the pair
    ratio being `second` / `first`. With `goal_column` each summary row ends with the goal."""
    rows, details = [], []
    for test, label, unit, goal in tests:
        pairs = [(value(work, first, test, r), value(work, second, test, r))
                 for r in range(1, runs + 1)]
        a_values = [a for a, _ in pairs if a is not None]
        b_values = [b for _, b in pairs if b is not None]
        ratios = [b / a for a, b in pairs if a and b is not None]
        end = f" {goal:.2f}x |" if goal_column else ""
        if not a_values or not b_values or not ratios:
            rows.append(f"| {label} | – | – | – | – | – | – |{end}")
            continue
        ma, mb = statistics.median(a_values), statistics.median(b_values)
        lo, hi = quartiles(ratios)
        reach = sum(1 for r in ratios if r >= goal)
        rows.append(
            f"| {label} ({unit}) | {num(ma, unit)} | {num(mb, unit)} | {mb / ma:.2f}x "
            f"| {statistics.median(ratios):.2f}x | {lo:.2f}x – {hi:.2f}x | {reach} of {len(ratios)} |"
            f"{end}"
        )
        details.append(f"| {label} | {first} | " + " ".join(
            num(a, unit) if a is not None else "–" for a, _ in pairs) + " |")
        details.append(f"| | {second} | " + " ".join(
            num(b, unit) if b is not None else "–" for _, b in pairs) + " |")
        details.append("| | ratio | " + " ".join(
            f"{b / a:.2f}" if a and b is not None else "–" for a, b in pairs) + " |")
    return rows, details


def table_lines(rows, details, columns):
    """The report's two tables as Markdown lines: the summary `rows` under the heading "test"
    and `columns`, then every run (`details`)."""
    return [
        "| test | " + " | ".join(columns) + " |",
        "| --- |" + " ---: |" * len(columns),
        *rows,
        "",
        "Every run, in order (pair 1 first):",
        "",
        "| test | setup | runs |",
        "| --- | --- | --- |",
        *details,
    ]
