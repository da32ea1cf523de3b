# bench_max_batch.gp - decode tokens/s against the batch size, up to the
# largest batch whose K+V fits under the cap, one line per (policy, budget)
# (`evictbench bench --max-batch`); the first batch over the cap is a cross on
# the x axis and the largest batch that fits is labelled.
#
# Data (harness/report/bench_figures.c, view v_bench_max_batch, one block per policy and budget):
#   batch_size, status, decode_tok_s (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, maxok<i>, xtics_cmd, any_oom, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

set xlabel "Batch size (sequences)"
set ylabel "Decode throughput (tokens/s, whole batch)"
eval xtics_cmd
set logscale x 2
set yrange [0:*]
set offsets graph 0.04, graph 0.08, graph 0.15, 0
set clip two
unset clip points
ok(s) = (s eq 'ok')
maxok(i) = value(sprintf('maxok%d', i))

plot for [i=1:nseries] datafile index (i-1) using "batch_size":(ok(strcol("status")) ? column("decode_tok_s") : NaN) \
         with linespoints lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) \
         dt policy_dt(pol(i)) title sprintf('%s (largest batch %d)', tit(i), maxok(i)), \
     for [i=1:nseries] datafile index (i-1) using "batch_size":(strcol("status") eq 'oom' ? 0 : NaN) \
         with points pt 2 ps 3 lw 3.5 lc rgb policy_color(pol(i), i) notitle, \
     NaN with points pt 2 ps 2.5 lw 3.5 lc rgb '#000000' title (any_oom ? 'over the KV cap' : '')
