# ablation.gp - the SkipKV ablation at one KV budget and batch size: R-KV, then
# + sentence scoring, + adaptive steering, + batch grouping (full SkipKV), and
# the static-steering control.  Accuracy (left) and mean generated length
# (right), one bar per row of the view, FullKV dashed.
#
# Data (harness/report/plots.c, view v_ablation, one block, rows in step order):
#   batching, policy, accuracy, mean_gen_tokens (read by name: the first line is the header)
# Variables: nbars, ref_acc, ref_len (FullKV, NaN when absent), plus common.gp's.
if (!exists("plotdir")) plotdir = 'plots'
wide = 1
load plotdir . '/common.gp'
unset title

# each step's bar is named by what it adds; the rest by the registry's display name
step_name(p) = (p eq 'skipkv-sent') ? '+sentence' : (p eq 'skipkv-sent-steer') ? '+steering' : \
               (p eq 'seal-static') ? 'static steer' : policy_name(p)
bar_label(p, b) = step_name(p) . "\n" . b
has_acc = (ref_acc == ref_acc)
has_len = (ref_len == ref_len)

# one empty slot right of the bars carries the FullKV label
set xrange [-0.6:nbars + 0.8]
set bmargin 4.5
set offsets 0, 0, graph 0.12, 0
set grid noxtics ytics
set style fill solid 0.85 border lc rgb '#333333'
set boxwidth 0.7
set xtics scale 0 font ',15'
unset key
# FullKV is named at the right end of its dashed line instead of in a key
fullkv_label(y, text) = sprintf("set label 1 \"%s\" at first %g, first %g center offset 0, 1.4 font ',17' front", text, nbars + 0.1, y)

set multiplot layout 1, 2 title title1 . "\n" . title2
set ylabel "Accuracy, pass@1 (%)"
set yrange [0:*<112]
unset label
if (has_acc) { eval fullkv_label(100*ref_acc, sprintf('FullKV\n%.1f%%', 100*ref_acc)) }
plot datafile using 0:(100*column("accuracy")):(policy_rgb(strcol("policy"), 0)):xtic(bar_label(strcol("policy"), strcol("batching"))) \
         with boxes lc rgb variable notitle, \
     '' using 0:(100*column("accuracy")):(sprintf('%.1f', 100*column("accuracy"))) with labels offset 0, 0.8 font ',18' notitle, \
     (has_acc ? 100*ref_acc : NaN) with lines lw 2.5 dt 2 lc rgb '#000000' \
         notitle
set ylabel "Mean generated length (tokens)"
set yrange [0:*]
unset label
if (has_len) { eval fullkv_label(ref_len, sprintf('FullKV\n%.0f', ref_len)) }
plot datafile using 0:"mean_gen_tokens":(policy_rgb(strcol("policy"), 0)):xtic(bar_label(strcol("policy"), strcol("batching"))) \
         with boxes lc rgb variable notitle, \
     '' using 0:"mean_gen_tokens":(sprintf('%.0f', column("mean_gen_tokens"))) with labels offset 0, 0.8 font ',18' notitle, \
     (has_len ? ref_len : NaN) with lines lw 2.5 dt 2 lc rgb '#000000' \
         notitle
unset multiplot
