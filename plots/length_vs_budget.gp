# length_vs_budget.gp - mean generated length (tokens) against the KV budget,
# one line per policy, FullKV dashed (as the SkipKV length figure).
#
# Data (harness/report/plots.c, view v_length_by_budget, one block per policy):
#   budget, mean_gen_tokens (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, ref (FullKV mean length or NaN), xtics_cmd,
#   logx, has_ratio, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

set xlabel (has_ratio ? "KV budget (tokens, and % of FullKV mean generation length)" : "KV budget (tokens)")
set ylabel "Mean generated length (tokens)"
eval xtics_cmd
# two-line tic labels (budget, % of FullKV length) need the axis label further down
if (has_ratio) { set xlabel offset 0, -0.7 }
if (logx) { set logscale x 2 }
set offsets graph 0.06, graph 0.06, graph 0.08, graph 0.08
set yrange [0<*:*]

has_ref = (ref == ref)

plot for [i=1:nseries] datafile index (i-1) using "budget":"mean_gen_tokens" with linespoints \
         lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) dt policy_dt(pol(i)) \
         title tit(i), \
     (has_ref ? ref : NaN) with lines lw 2.5 dt 2 lc rgb policy_color('fullkv', 0) \
         title (has_ref ? sprintf('FullKV (%.0f)', ref) : '')
