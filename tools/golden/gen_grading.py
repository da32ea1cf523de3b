#!/usr/bin/env python3
"""Expected grading verdicts for tests/fixtures/grade_extra.jsonl.

Runs the reference grader itself - Qwen2.5-Math evaluation/parser.py and
grader.py (commit a45202b) - on our extra cases, so that the C grader is
checked against the reference's behaviour and not against our reading of it.

    python3 tools/golden/gen_grading.py --qwen-eval /path/to/Qwen2.5-Math/evaluation \
        tools/golden/grade_extra_inputs.jsonl > tests/fixtures/grade_extra.jsonl

Needs: sympy (1.12 as the reference pins; 1.14 works), antlr4-python3-runtime
4.11.1 (what the bundled latex2sympy was generated with), word2number, regex.
The reference's utils.py (prompt templates; it imports numpy) is not needed by
the parser or grader and is replaced by an empty module.

Each input line has label, model_output, reference and optional dataset
("gsm8k" takes the reference after the last '####', as parse_ground_truth
does).  The completion is first cut at the stop strings our harness cuts at
(the reference's generation settings stop there).  Output lines add
extracted_normalized, reference_normalized and expected.
"""
import argparse
import json
import sys
import types

STOPS = ["</s>", "<|im_end|>", "<|endoftext|>"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen-eval", required=True, help="Qwen2.5-Math evaluation/ directory")
    ap.add_argument("inputs")
    args = ap.parse_args()
    sys.path[:0] = [args.qwen_eval, args.qwen_eval + "/latex2sympy"]
    sys.modules["utils"] = types.ModuleType("utils")
    from parser import extract_answer, strip_string  # noqa: E402
    from grader import math_equal  # noqa: E402

    for line in open(args.inputs, encoding="utf-8"):
        if not line.strip():
            continue
        case = json.loads(line)
        data_name = "gsm8k" if case.get("dataset", "").startswith("gsm8k") else "math"
        text = case["model_output"]
        for stop in STOPS:
            text = text.split(stop)[0]
        # run_execute: extract_answer (which normalises) and strip_string again
        pred = strip_string(extract_answer(text, data_name))
        ref = case["reference"]
        if data_name == "gsm8k" and "####" in ref:
            ref = ref.split("####")[-1]
        ref = strip_string(ref)
        case["extracted_normalized"] = pred
        case["reference_normalized"] = ref
        case["expected"] = bool(math_equal(pred, ref))
        print(json.dumps(case, ensure_ascii=False))


if __name__ == "__main__":
    main()
