# accuracy_vs_budget.gp - accuracy (pass@1, %) against the KV budget, one line
# per policy, FullKV as a dashed reference; each budget is also labelled as a
# percentage of FullKV's mean generation length (as the SkipKV accuracy figure).
#
# Data (harness/report/plots.c, view v_accuracy_by_budget, one block per policy):
#   budget, accuracy (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, ref (FullKV accuracy or NaN), xtics_cmd,
#   logx, has_ratio, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

set xlabel (has_ratio ? "KV budget (tokens, and % of FullKV mean generation length)" : "KV budget (tokens)")
set ylabel "Accuracy, pass@1 (%)"
eval xtics_cmd
# two-line tic labels (budget, % of FullKV length) need the axis label further down
if (has_ratio) { set xlabel offset 0, -0.7 }
if (logx) { set logscale x 2 }
set offsets graph 0.06, graph 0.06, graph 0.08, graph 0.08
set yrange [0<*:*<100]

has_ref = (ref == ref)

plot for [i=1:nseries] datafile index (i-1) using "budget":(100*column("accuracy")) with linespoints \
         lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) dt policy_dt(pol(i)) \
         title tit(i), \
     (has_ref ? 100*ref : NaN) with lines lw 2.5 dt 2 lc rgb policy_color('fullkv', 0) \
         title (has_ref ? sprintf('FullKV (%.1f%%)', 100*ref) : '')
