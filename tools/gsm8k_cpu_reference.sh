#!/bin/sh
# gsm8k_cpu_reference.sh - write results/reference/gsm8k_cpu.md and
# results/reference/gsm8k_cpu/ (the `tables` output) from the database of the
# CPU reproduction (experiments gsm8k_cpu_sweep and gsm8k_cpu_batching).
#
#   tools/gsm8k_cpu_reference.sh [DB]        (default results/gsm8k_cpu.db)
#
# `make cpu-sweep` runs both experiments and then this script.  The database
# is read through a merged copy made by this build (`evictbench merge`), so
# that a file written by an older build is read with this build's views.
set -eu
DB=${1:-results/gsm8k_cpu.db}
OUT=results/reference
EB=./evictbench
die() { echo "gsm8k_cpu_reference.sh: $*" >&2; exit 1; }
[ -f "$DB" ] || die "$DB not found: run make cpu-sweep first"
[ -x "$EB" ] || die "$EB not found: run make first"
command -v sqlite3 >/dev/null 2>&1 || die "sqlite3 not found (make deps installs it)"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
REF=$TMP/ref.db
"$EB" merge "$DB" --into "$REF" --quiet || die "cannot read $DB"
# Builds before schema 4 recorded fullkv-pss with the sweep's default budget
# (1024), which it never used: it evicts nothing.  Shown without one.
sqlite3 "$REF" "update runs set budget = null where policy in ('fullkv', 'fullkv-pss')"

mkdir -p "$OUT"
rm -rf "$OUT/gsm8k_cpu"
"$EB" tables --db "$REF" --out "$OUT/gsm8k_cpu" >/dev/null
rm -f "$OUT"/gsm8k_cpu/*.tex

q() { sqlite3 -separator ' | ' "$REF" "$1"; }
code=$(q "select group_concat(distinct code_version) from experiments")
n_ok=$(q "select count(*) from runs where status = 'ok'")
{
echo "# GSM8K CPU reproduction: the run behind the README's findings"
echo
echo "Written by \`tools/gsm8k_cpu_reference.sh\` from the database that these commands"
echo "fill (from the repository root, after \`make deps\`; \`make cpu-sweep\` runs all three):"
echo
echo "    ./evictbench exp gsm8k_cpu_sweep --db results/gsm8k_cpu.db --threads 2"
echo "    ./evictbench exp gsm8k_cpu_batching --db results/gsm8k_cpu.db --threads 2"
echo "    tools/gsm8k_cpu_reference.sh results/gsm8k_cpu.db"
echo
echo "Code: \`$code\` (the code hash is part of every run key, so a newer build reruns"
echo "the points).  Model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, 1,117,320,768 bytes,"
echo "sha256 \`cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046\`; native weights, f32 KV."
echo "Data: \`datasets/data/gsm8k\` test split, problems 0-99 (checksums in \`datasets/data/SHA256SUMS\`)."
echo "$n_ok points recorded."
echo
echo "Every point: accuracy (pass@1, greedy), mean generated tokens, share of traces that"
echo "finished under the 320-token cap, budget over FullKV's mean generation length, wall time"
echo "and generated tokens per second (prefill included), peak KV bytes of the whole batch:"
echo
echo "| policy | budget | batch | accuracy | mean tokens | finished | budget / FullKV length | wall s | tok/s | peak KV bytes |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
q "select '| ' || r.policy, coalesce(r.budget, '-'), r.batch_size || ' ' || r.batching,
          printf('%.2f', r.accuracy), printf('%.1f', r.mean_gen_tokens),
          printf('%.2f', (select avg(finished) from samples s where s.run_id = r.id)),
          case when r.budget is null then '-'
               else printf('%.2f', r.budget / f.mean_gen_tokens) end,
          printf('%.0f', r.wall_s), printf('%.1f', r.tokens_per_s), r.peak_kv_bytes || ' |'
   from v_run r left join v_fullkv_ref f on f.model = r.model and f.dataset = r.dataset_label
        and f.sampling is r.sampling_json and f.max_new_tokens is r.max_new_tokens
   where r.status = 'ok' order by r.id"
echo
echo "Batching at one budget (batch 1: the continuous batch of the sweep, whose every"
echo "sequence gets its batch-1 output; padded and grouped: static batches of 8):"
echo
echo "| policy | budget | setting | batch | accuracy | mean tokens | change vs batch 1 |"
echo "|---|---:|---|---:|---:|---:|---:|"
q "select '| ' || b.policy, b.budget, b.setting, b.batch_size, printf('%.2f', b.accuracy),
          printf('%.1f', b.mean_gen_tokens),
          case when c.accuracy is null then '-'
               else printf('%+.2f', b.accuracy - c.accuracy) end || ' |'
   from v_batching b left join runs c on c.policy = b.policy and c.budget = b.budget
        and c.batching = 'continuous' and c.status = 'ok' and c.model = b.model
   where b.setting in ('padded', 'grouped')
   order by b.policy, b.budget, b.setting desc"
echo
echo "Sentence statistics (SkipKV's tracker; pairs: sentence pairs above the PSS threshold per"
echo "trace; high-sim share: generated sentences whose closest earlier sentence has cosine > 0.95):"
echo
echo "| policy | budget | outcome | traces | pairs per trace | mean max PSS | high-sim share | mean length |"
echo "|---|---:|---|---:|---:|---:|---:|---:|"
q "select '| ' || p.policy, coalesce(p.budget, '-'),
          case p.correct when 1 then 'correct' else 'incorrect' end, p.n_samples,
          printf('%.2f', p.mean_redundant_pairs), printf('%.3f', p.mean_pss_max),
          printf('%.3f', k.high_sim_share), printf('%.1f', p.mean_gen_tokens) || ' |'
   from v_pss p left join v_sentence_kinds k on k.policy = p.policy
        and k.budget is p.budget and k.correct = p.correct
   order by p.policy, p.correct"
echo
echo "Sentence kinds in the generated text (SEAL's keywords: reflection and transition"
echo "steps are what a steering vector is calibrated from):"
echo
echo "| policy | budget | kind | sentences |"
echo "|---|---:|---|---:|"
q "select '| ' || policy, coalesce(budget, '-'), kind, count(*) || ' |'
   from v_sentences where in_prompt = 0
   group by policy, budget, kind order by policy, kind"
echo
echo "The generated tables (\`evictbench tables\`) are in \`gsm8k_cpu/\`."
} > "$OUT/gsm8k_cpu.md"
echo "wrote $OUT/gsm8k_cpu.md and $OUT/gsm8k_cpu/" >&2
