# fidelity_vs_budget.gp - how close each policy stays to FullKV when replaying
# FullKV's traces: mean KL(FullKV || policy) per step (left) and top-1
# agreement (right) against the KV budget, one line per policy.
#
# Data (harness/report/plots.c, view v_fidelity, one block per policy):
#   budget, mean_kl, top1_agree (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, has_kl, has_top1, xtics_cmd, logx,
#   has_ratio, plus those of common.gp.
if (!exists("plotdir")) plotdir = 'plots'
wide = (has_kl && has_top1)
load plotdir . '/common.gp'
unset title


set xlabel (has_ratio ? "KV budget (tokens, and % of FullKV mean length)" : "KV budget (tokens)")
eval xtics_cmd
# two-line tic labels (budget, % of FullKV length) need the axis label further down
if (has_ratio) { set xlabel offset 0, -0.7 }
if (logx) { set logscale x 2 }
set offsets graph 0.06, graph 0.06, graph 0.08, graph 0.08

set multiplot layout 1, (has_kl + has_top1) title title1 . "\n" . title2
if (has_kl) {
    set ylabel "Mean KL(FullKV || policy) per step (nats)"
    set yrange [0:*]
    set offsets graph 0.06, graph 0.06, graph 0.08, 0
    # KL falls with the budget: the top right corner is free for the key
    set key inside top right vertical Left reverse box opaque
    plot for [i=1:nseries] datafile index (i-1) using "budget":"mean_kl" with linespoints \
             lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) title tit(i), \
         0 with lines lw 2.5 dt 2 lc rgb policy_color('fullkv', 0) title 'FullKV'
}
if (has_top1) {
    set ylabel "Top-1 agreement with FullKV (%)"
    set yrange [0<*:*<103]
    set offsets graph 0.06, graph 0.06, graph 0.04, graph 0.08
    # agreement rises with the budget: the bottom right corner is free
    if (has_kl) { unset key } else { set key inside bottom right vertical Left reverse box opaque }
    plot for [i=1:nseries] datafile index (i-1) using "budget":(100*column("top1_agree")) with linespoints \
             lw 2.5 lc rgb policy_color(pol(i), i) pt policy_pt(pol(i), i) title tit(i), \
         100 with lines lw 2.5 dt 2 lc rgb policy_color('fullkv', 0) title 'FullKV'
}
unset multiplot
