# bench_throughput_vs_context.gp - decode tokens/s (whole batch, median decode
# step) against the context the caches held, one line per (policy, budget),
# for one model, KV type and batch size (`evictbench bench --contexts`).
# Contexts that did not fit in memory are crosses on the x axis.
#
# Data (harness/report/bench_figures.c, view v_bench_context, one block per policy and budget):
#   context, status, decode_tok_s (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, xtics_cmd, any_oom, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

set xlabel "Context (KV slots before decode)"
set ylabel "Decode throughput (tokens/s, whole batch)"
eval xtics_cmd
set logscale x 2
set yrange [0:*]
set offsets graph 0.04, graph 0.04, graph 0.1, 0
set clip two
unset clip points
ok(s) = (s eq 'ok')

plot for [i=1:nseries] datafile index (i-1) using "context":(ok(strcol("status")) ? column("decode_tok_s") : NaN) \
         with linespoints lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) \
         dt policy_dt(pol(i)) title tit(i), \
     for [i=1:nseries] datafile index (i-1) using "context":(strcol("status") eq 'oom' ? 0 : NaN) \
         with points pt 2 ps 3 lw 3.5 lc rgb policy_color(pol(i), i) notitle, \
     NaN with points pt 2 ps 2.5 lw 3.5 lc rgb '#000000' title (any_oom ? 'out of memory' : '')
