#!/usr/bin/env python3
"""monitoring-check.py METRICS_FILE RULES.yml DASHBOARD.json

Every metric name that the alert rules and the Grafana dashboard query must be
one the broker exports: a family of a "# TYPE" line of METRICS_FILE (a real
scrape), a histogram family's _bucket/_sum/_count series, or Prometheus' own
"up".  The dashboard must parse as JSON and every panel must have a query.
Prints each unknown name and exits 1; exits 0 when all are known.
"""
import json
import re
import sys

NAME = re.compile(r'\b((?:cryptoserver|process)_[a-z0-9_]+)\b')


def families(path):
    known = {"up"}
    for line in open(path, encoding="utf-8"):
        m = re.match(r'# TYPE (\S+) (\S+)', line)
        if not m:
            continue
        known.add(m.group(1))
        if m.group(2) == "histogram":
            known.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
    return known


def rule_exprs(path):
    # The rules file is YAML; its expressions are the "expr:" lines (no
    # YAML library needed for that).
    return [line.split("expr:", 1)[1].strip() for line in open(path, encoding="utf-8")
            if line.strip().startswith("expr:")]


def dashboard_exprs(path):
    dash = json.load(open(path, encoding="utf-8"))
    exprs = []
    for panel in dash["panels"]:
        targets = [t["expr"] for t in panel.get("targets", []) if t.get("expr")]
        if not targets:
            raise SystemExit("dashboard panel %r has no query" % panel.get("title"))
        exprs += targets
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            exprs.append(var["definition"])
    return exprs


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    known = families(sys.argv[1])
    if len(known) < 5:
        raise SystemExit("%s: not a broker's metrics (no # TYPE lines)" % sys.argv[1])
    bad = 0
    for where, exprs in (("rules", rule_exprs(sys.argv[2])), ("dashboard", dashboard_exprs(sys.argv[3]))):
        if not exprs:
            raise SystemExit("%s: no queries found" % where)
        for expr in exprs:
            for name in NAME.findall(expr) + (["up"] if re.match(r'up\{', expr) else []):
                if name not in known:
                    print("%s: %s is not exported by the broker: %s" % (where, name, expr))
                    bad += 1
    print("%d rule and dashboard queries checked, %d unknown metric names" %
          (len(rule_exprs(sys.argv[2])) + len(dashboard_exprs(sys.argv[3])), bad))
    sys.exit(1 if bad else 0)


main()
