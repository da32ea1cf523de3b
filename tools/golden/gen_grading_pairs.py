#!/usr/bin/env python3
"""Answer pairs for a differential test of the C grader against the reference.

Builds grading inputs from the reference answers of math500 and
math_train_1000 (../shared/datasets): each answer boxed as itself, against a
neighbouring or random answer of the same subject, as a "final answer is
$x = ...$" sentence, as a/b for a fraction, and - where sympy evaluates it -
as decimals with 3, 5 and 8 significant digits.  Feed the output to
gen_grading.py for the reference's verdicts:

    python3 tools/golden/gen_grading_pairs.py --datasets ../shared/datasets --all > pairs.jsonl
    python3 tools/golden/gen_grading.py --qwen-eval DIR pairs.jsonl > graded.jsonl

Without --all, a seeded sample of --sample pairs whose two normalised sides are
not identical strings is written (what tests/fixtures/grade_pairs.jsonl holds:
run gen_grading.py on it).  The full set (9,864 pairs) agreed with the
reference on every verdict and both normalised strings when this sample was
drawn.  Needs sympy with antlr4-python3-runtime 4.11 for the decimal variants
(pairs whose answer it cannot evaluate just get none).
"""
import argparse
import json
import random
import re


def decimal_variants(answer):
    try:
        from sympy import N
        from sympy.parsing.latex import parse_latex
        v = complex(N(parse_latex(answer)))
    except Exception:
        return []
    if v.imag != 0 or abs(v.real) >= 1e12:
        return []
    return ["%.*g" % (d, v.real) for d in (3, 5, 8)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--sample", type=int, default=300)
    args = ap.parse_args()
    rows = []
    for name in ("math500.jsonl", "math_train_1000.jsonl"):
        rows += [json.loads(l) for l in open(f"{args.datasets}/{name}", encoding="utf-8")]
    rng = random.Random(7)
    by_subject = {}
    for r in rows:
        by_subject.setdefault(r.get("subject"), []).append(r["answer"])
    pairs = []
    for i, r in enumerate(rows):
        a = r["answer"]
        pairs.append((r"\boxed{%s}" % a, a))
        pairs.append((r"\boxed{%s}" % rows[(i + 1) % len(rows)]["answer"], a))
        pairs.append((r"\boxed{%s}" % rng.choice(by_subject[r.get("subject")]), a))
        pairs.append(("The final answer is $x = %s$." % a, a))
        m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", a.replace("dfrac", "frac"))
        if m:
            pairs.append((r"\boxed{%s%s/%s}" % m.groups(), a))
        for d in decimal_variants(a):
            pairs.append((r"\boxed{%s}" % d, a))
    if not args.all:
        interesting = [p for p in pairs if p[0] != r"\boxed{%s}" % p[1]]
        pairs = random.Random(11).sample(interesting, min(args.sample, len(interesting)))
    for n, (out, ref) in enumerate(pairs):
        print(json.dumps({"label": "pair %d" % n, "model_output": out, "reference": ref},
                         ensure_ascii=False))


if __name__ == "__main__":
    main()
