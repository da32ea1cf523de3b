# peak_kv_vs_budget.gp - peak KV-cache memory per sequence against the KV
# budget, one line per policy, FullKV's peak as a dashed reference.
#
# Data (harness/report/plots.c, view v_kv_by_budget, one block per policy):
#   budget, seq_peak_kv_bytes (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, ref (FullKV peak bytes or NaN), kvscale,
#   kvunit, xtics_cmd, logx, has_ratio, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

set xlabel (has_ratio ? "KV budget (tokens, and % of FullKV mean generation length)" : "KV budget (tokens)")
set ylabel sprintf("Peak KV cache per sequence (%s)", kvunit)
eval xtics_cmd
# two-line tic labels (budget, % of FullKV length) need the axis label further down
if (has_ratio) { set xlabel offset 0, -0.7 }
if (logx) { set logscale x 2 }
set offsets graph 0.06, graph 0.06, graph 0.08, 0
set yrange [0:*]

has_ref = (ref == ref)

plot for [i=1:nseries] datafile index (i-1) using "budget":(column("seq_peak_kv_bytes")/kvscale) with linespoints \
         lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) dt policy_dt(pol(i)) \
         title tit(i), \
     (has_ref ? ref/kvscale : NaN) with lines lw 2.5 dt 2 lc rgb policy_color('fullkv', 0) \
         title (has_ref ? sprintf('FullKV (%.3g %s)', ref/kvscale, kvunit) : '')
