# batching_bs1_vs_padded_vs_grouped.gp - accuracy per KV budget at batch size 1
# against larger batches that are left-padded (pads stay in the cache and eat
# the budget) or grouped by prompt length (the SkipKV multi-batch figure).
# Bars are clustered by budget; colour is the policy, the fill the setting:
# solid = batch 1, hatched = padded, light = grouped.
#
# Data (harness/report/plots.c, view v_batching, one block per policy, batch size and setting):
#   budget, accuracy (read by name: the first line of every block is the header)
# Variables: nseries, pol<i>, suf<i>, set<i>, nbudget, bud<k>, ref (FullKV
#   accuracy at batch 1 or NaN), xtics_cmd (tics at 1..nbudget), has_ratio.
if (!exists("plotdir")) plotdir = 'plots'
load plotdir . '/common.gp'

setting(i) = value(sprintf('set%d', i))
bidx(b) = sum [k=1:nbudget] (value(sprintf('bud%d', k)) == b ? k : 0)
bw = 0.84 / nseries
xpos(b, i) = bidx(b) - 0.42 + bw * (i - 0.5)
has_ref = (ref == ref)

set xlabel (has_ratio ? "KV budget (tokens, and % of FullKV mean generation length)" : "KV budget (tokens)")
set ylabel "Accuracy, pass@1 (%)"
eval xtics_cmd
# two-line tic labels (budget, % of FullKV length) need the axis label further down
if (has_ratio) { set xlabel offset 0, -0.7 }
set grid noxtics ytics
set xrange [0.5:nbudget + 0.5]
set yrange [0:*<104]
set offsets 0, 0, graph 0.1, 0
set style fill solid 1.0 border -1

plot for [i=1:nseries] datafile index (i-1) \
         using (setting(i) eq 'bs1' ? xpos(column("budget"), i) : NaN):(100*column("accuracy")):(bw * 0.92) with boxes \
         fs solid 0.9 border lc rgb '#333333' lc rgb policy_color(pol(i), i) \
         title (setting(i) eq 'bs1' ? tit(i) : ''), \
     for [i=1:nseries] datafile index (i-1) \
         using (setting(i) eq 'padded' ? xpos(column("budget"), i) : NaN):(100*column("accuracy")):(bw * 0.92) with boxes \
         fs pattern 4 border lc rgb policy_color(pol(i), i) lw 1.5 lc rgb policy_color(pol(i), i) \
         title (setting(i) eq 'padded' ? tit(i) : ''), \
     for [i=1:nseries] datafile index (i-1) \
         using (setting(i) eq 'grouped' ? xpos(column("budget"), i) : NaN):(100*column("accuracy")):(bw * 0.92) with boxes \
         fs solid 0.35 border lc rgb policy_color(pol(i), i) lc rgb policy_color(pol(i), i) \
         title (setting(i) eq 'grouped' ? tit(i) : ''), \
     (has_ref ? 100*ref : NaN) with lines lw 2.5 dt 2 lc rgb policy_color('fullkv', 0) \
         title (has_ref ? sprintf('FullKV (%.1f%%)', 100*ref) : '')
