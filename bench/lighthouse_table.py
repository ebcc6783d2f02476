"""The table of bench/lighthouse.sh: one row per page from Lighthouse's JSON reports, and under it
every accessibility or best-practices audit that did not pass, so a score under 100 is explained."""
import json
import pathlib
import sys


def chain_length(chains, depth=1):
    return max((chain_length(c.get("children", {}), depth + 1) for c in chains.values()), default=depth - 1)


work = pathlib.Path(sys.argv[1])
print("| page | accessibility | best practices | performance | CLS | TBT | LCP | chain |")
print("|---|---|---|---|---|---|---|---|")
failing = []
for line in (work / "pages.txt").read_text().splitlines():
    name, path = line.split(" ", 1)
    report = json.loads((work / f"{name}.json").read_text())
    cats, audits = report["categories"], report["audits"]
    score = lambda c: round(100 * (cats[c]["score"] or 0))
    chains = audits.get("critical-request-chains", {}).get("details", {}).get("chains", {})
    shown = path if len(path) < 30 else path[:22] + "…"
    print(
        f"| {name} `{shown}` | {score('accessibility')} | {score('best-practices')} | {score('performance')} "
        f"| {audits['cumulative-layout-shift']['numericValue']:.3f} | {audits['total-blocking-time']['numericValue']:.0f} ms "
        f"| {audits['largest-contentful-paint']['numericValue']:.0f} ms | {chain_length(chains)} |"
    )
    for cat in ("accessibility", "best-practices"):
        for ref in cats[cat]["auditRefs"]:
            audit = audits[ref["id"]]
            if ref["weight"] > 0 and audit["score"] is not None and audit["score"] < 1:
                failing.append(f"- {name}: {cat} `{ref['id']}`: {audit['title']}")
print()
print("Audits that did not pass:" if failing else "Every weighted accessibility and best-practices audit passed on every page.")
for f in failing:
    print(f)
