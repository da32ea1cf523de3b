# throughput_vs_batch.gp - generated tokens per second against the batch size,
# one line per (policy, budget); batch sizes that ran out of memory are marked
# with a cross on the x axis, and the largest batch that ran is annotated on
# every line that hit an out-of-memory.
#
# Data (harness/report/plots.c, view v_throughput_by_batch, one block per policy and budget):
#   batch_size, status, tokens_per_s (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, oom<i> (1: the line hit an OOM), maxok<i>,
#   maxtps<i> (tokens/s at maxok<i>),
#   any_oom, xtics_cmd, logx, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

set xlabel "Batch size (sequences)"
set ylabel "Throughput (generated tokens/s)"
eval xtics_cmd
if (logx) { set logscale x 2 }
set offsets graph 0.06, graph 0.06, graph 0.15, 0
set yrange [0:*]
set clip two
unset clip points

oom(i) = value(sprintf('oom%d', i))
maxok(i) = value(sprintf('maxok%d', i))
maxtps(i) = value(sprintf('maxtps%d', i))
ok(s) = (s eq 'ok')

# the largest batch that ran, on every line that ran out of memory above it
do for [i=1:nseries] {
    if (oom(i) && maxok(i) == maxok(i) && maxtps(i) == maxtps(i)) {
        set label i sprintf('largest batch %d', maxok(i)) at maxok(i), maxtps(i) left offset 1.2, 0 \
            tc rgb policy_color(pol(i), i) front
    }
}

plot for [i=1:nseries] datafile index (i-1) using "batch_size":(ok(strcol("status")) ? column("tokens_per_s") : NaN) with linespoints \
         lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) dt policy_dt(pol(i)) \
         title tit(i), \
     for [i=1:nseries] datafile index (i-1) using "batch_size":(strcol("status") eq 'oom' ? 0 : NaN) with points \
         pt 2 ps 3 lw 3.5 lc rgb policy_color(pol(i), i) notitle, \
     NaN with points pt 2 ps 2.5 lw 3.5 lc rgb '#000000' title (any_oom ? 'out of memory' : '')
