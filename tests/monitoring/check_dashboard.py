#!/usr/bin/env python3
"""Checks rlbd's Grafana dashboard (tests/monitoring/run.sh).

usage: check_dashboard.py DASHBOARD.json SCHEMA.json [--rules-out FILE]

1. validates the dashboard against the JSON schema (Draft 2020-12, the jsonschema module);
2. cross-checks what a schema cannot say: unique panel ids, refIds unique within a panel, panels
   inside the 24-column grid and not overlapping, every $variable a query uses defined in
   templating (or one of Grafana's own), only labels the daemon's series carry in selectors;
3. with --rules-out, writes every query (variables replaced by sample values) as a Prometheus
   recording rule, so that `promtool check rules FILE` parses each one as PromQL.
Prints one line per problem; exits 1 when there is any.
"""

import json
import re
import sys

import jsonschema

GRAFANA_VARS = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
# Labels on rlbd's series: the exposition's own (bond on every one; port, reason, and
# rlbd_info's version, mode) and those Prometheus adds when it scrapes (instance, job).
KNOWN_LABELS = {"instance", "job", "bond", "port", "reason", "version", "mode"}
SAMPLE_VALUES = {"instance": "host:9100", "bond": "bond0", "port": "sl0|sl1", "datasource": "prom",
                 "__rate_interval": "1m", "__interval": "15s", "__range": "1h",
                 "__interval_ms": "15000", "__range_s": "3600"}
VAR_RE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
SELECTOR_RE = re.compile(r"\{([^{}]*)\}")
BY_RE = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def main(argv):
    args = argv[1:]
    rules_out = None
    if "--rules-out" in args:
        i = args.index("--rules-out")
        rules_out = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as f:
        dash = json.load(f)
    with open(args[1], encoding="utf-8") as f:
        schema = json.load(f)

    problems = []
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for e in sorted(validator.iter_errors(dash), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        problems.append(f"schema: {where}: {e.message}")
    if problems:
        report(problems)
        return 1

    variables = {v["name"] for v in dash["templating"]["list"]}
    queries = []  # (where, expr)
    for v in dash["templating"]["list"]:
        q = v.get("query")
        if v["type"] == "query":
            queries.append((f"variable {v['name']}", q["query"] if isinstance(q, dict) else q))

    ids = set()
    cells = {}
    for p in dash["panels"]:
        name = f"panel {p['id']} ({p['title']})"
        if p["id"] in ids:
            problems.append(f"{name}: id used twice")
        ids.add(p["id"])
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            problems.append(f"{name}: x + w = {g['x'] + g['w']} > 24 columns")
        for x in range(g["x"], min(g["x"] + g["w"], 24)):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.append(f"{name}: overlaps {cells[(x, y)]} at column {x}, row {y}")
                    break
                cells[(x, y)] = name
            else:
                continue
            break
        refs = [t["refId"] for t in p["targets"]]
        if len(refs) != len(set(refs)):
            problems.append(f"{name}: refIds not unique: {refs}")
        for t in p["targets"]:
            queries.append((f"{name} target {t['refId']}", t["expr"]))

    for where, expr in queries:
        for var in VAR_RE.findall(expr):
            if var not in variables and var not in GRAFANA_VARS:
                problems.append(f"{where}: ${var} is not a dashboard variable: {expr}")
        label_sets = SELECTOR_RE.findall(expr) + BY_RE.findall(expr)
        for sel in label_sets:
            for m in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=|,|$)", sel):
                if m not in KNOWN_LABELS:
                    problems.append(f"{where}: label {m} is not on rlbd's series: {expr}")
        if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
            problems.append(f"{where}: unbalanced brackets: {expr}")

    if rules_out:
        lines = ["groups:", "  - name: dashboard-queries", "    rules:"]
        n = 0
        for where, expr in queries:
            if expr.startswith("label_values("):
                # Grafana's variable function, not PromQL: check its metric selector instead.
                m = re.match(r"label_values\((.*),\s*[A-Za-z_]+\)$", expr)
                if not m:
                    problems.append(f"{where}: cannot read {expr}")
                    continue
                expr = m.group(1)
            for var, val in SAMPLE_VALUES.items():
                expr = expr.replace("${" + var + "}", val).replace("$" + var, val)
            n += 1
            lines.append(f"      - record: dashboard:query_{n}")
            lines.append(f"        expr: {json.dumps(expr)}")
        with open(rules_out, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    report(problems)
    print(f"dashboard: {len(dash['panels'])} panels, {len(queries)} queries, "
          f"{len(variables)} variables; {len(problems)} problems")
    return 1 if problems else 0


def report(problems):
    for p in problems:
        print(f"  {p}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
