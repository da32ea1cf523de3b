# bench_speedup_vs_context.gp - each policy's decode tokens/s over FullKV's at
# the same context, batch size and KV type, against the context (`evictbench
# bench --contexts`); the dashed line at 1 is FullKV.
#
# Data (harness/report/bench_figures.c, view v_bench_context without FullKV, one block per policy and budget):
#   context, status, speedup (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, xtics_cmd, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

set xlabel "Context (KV slots before decode)"
set ylabel "Decode speedup over FullKV (x)"
eval xtics_cmd
set logscale x 2
set yrange [0:*]
set offsets graph 0.04, graph 0.04, graph 0.1, 0
ok(s) = (s eq 'ok')

plot 1 with lines lw 2 lc rgb '#000000' dt 2 title 'FullKV', \
     for [i=1:nseries] datafile index (i-1) using "context":(ok(strcol("status")) ? column("speedup") : NaN) \
         with linespoints lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) \
         dt policy_dt(pol(i)) title tit(i)
