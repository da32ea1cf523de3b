#!/usr/bin/env python3
"""Count SEAL thought steps per class in generated texts, independently of
the C code: a reference for `evictbench calibrate`'s header counts.

Reads the JSONL that `evictbench generate --out` writes (one {"text": ...}
per line) and prints "reflection R transition T execution X" summed over the
lines.  A step is the text after one "\\n\\n" up to the next (the text before
the first is not a step; empty steps are skipped); the whole response is the
thought (--think always).  Classification follows ../shared/specs/policies.md
section 6.2 with the reference's keyword list, typo included.

Text-level splitting agrees with calibrate's token-level split (--split pairs)
when every "\\n\\n" in the text is one split token or a "\\n" pair, which holds
for plain prose; it is a check for chosen traces, not a general tool."""
import json
import sys

REFLECTION = ["verify", "make sure", "hold on", "think again", "'s correct", "'s incorrect",
              "let me check", "seems right"]
TRANSITION = ["think differenly", "another way", "another approach", "another method",
              "another solution", "another strategy", "another technique"]


def classify(step):
    s = step.strip().lower()
    if s.startswith("wait") or any(k in s for k in REFLECTION):
        return "reflection"
    if s.startswith("alternatively") or any(k in s for k in TRANSITION):
        return "transition"
    return "execution"


def main():
    counts = {"reflection": 0, "transition": 0, "execution": 0}
    for line in open(sys.argv[1], encoding="utf-8"):
        text = json.loads(line)["text"]
        for step in text.split("\n\n")[1:]:
            if step:
                counts[classify(step)] += 1
    print("reflection %d transition %d execution %d" %
          (counts["reflection"], counts["transition"], counts["execution"]))


if __name__ == "__main__":
    main()
