# pss_correct_vs_incorrect.gp - per-trace redundancy of correct against
# incorrect traces: the number of sentence pairs whose similarity (PSS) is above
# the threshold (left) and the number of non-execution thoughts (right), as box
# plots with every trace drawn as a point and the mean as a diamond.
#
# Data (harness/report/plots.c, view v_pss_samples, block idx_correct = correct traces,
# block idx_incorrect = incorrect traces; -1 when there are none):
#   n_redundant_pairs, n_nonexec (read by name: the first line of every block is the header)
# Variables: has_pairs, has_nonexec, idx_correct, idx_incorrect, n_correct,
#   n_incorrect, mean_pairs1/0, mean_nonexec1/0 (correct/incorrect), plus common.gp's.
if (!exists("plotdir")) plotdir = 'plots'
wide = (has_pairs && has_nonexec)
load plotdir . '/common.gp'
unset title
unset key

traces(n) = sprintf("%d trace%s", n, n == 1 ? "" : "s")
set xtics (sprintf("correct\n(%s)", traces(n_correct)) 1, sprintf("incorrect\n(%s)", traces(n_incorrect)) 2)
set xrange [0.4:2.6]
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0
set bmargin 5
set grid noxtics ytics
set style boxplot nooutliers range 1.5 fraction 0.95
set style fill solid 0.25 border -1
set boxwidth 0.45
# a deterministic spread of the points around their class
jit(k) = 0.3 * ((k * 0.618034 - floor(k * 0.618034)) - 0.5)
# block numbers that are always valid (an absent class is drawn by an empty loop)
ic = (idx_correct >= 0) ? idx_correct : 0
ii = (idx_incorrect >= 0) ? idx_incorrect : 0
ratio_text(a, b) = (a == a && b == b && a > 0) ? sprintf(" (incorrect/correct = %.2fx)", b / a) : ""

set multiplot layout 1, (has_pairs + has_nonexec) title title1 . "\n" . title2
do for [m=1:2] {
    if ((m == 1 && has_pairs) || (m == 2 && has_nonexec)) {
        col = (m == 1) ? 'n_redundant_pairs' : 'n_nonexec'
        mc = (m == 1) ? mean_pairs1 : mean_nonexec1
        mi = (m == 1) ? mean_pairs0 : mean_nonexec0
        set ylabel (m == 1 ? "High-similarity sentence pairs per trace" : "Non-execution thoughts per trace")
        set title (m == 1 ? "Sentence pairs above the PSS threshold" : "Non-execution thoughts") . ratio_text(mc, mi)
        # the means, as labelled diamonds (labels, not plot elements: a class may be absent)
        unset label
        if (mc == mc) { set label 1 sprintf('mean %.2f', mc) at 1, mc left offset 2.2, 0 point pt 13 ps 2.2 lc rgb '#000000' front }
        if (mi == mi) { set label 2 sprintf('mean %.2f', mi) at 2, mi left offset 2.2, 0 point pt 13 ps 2.2 lc rgb '#000000' front }
        plot for [k=1:(idx_correct >= 0)] datafile index ic using (1):(column(col)) with boxplot \
                 lc rgb correct_color lw 2, \
             for [k=1:(idx_incorrect >= 0)] datafile index ii using (2):(column(col)) with boxplot \
                 lc rgb incorrect_color lw 2, \
             for [k=1:(idx_correct >= 0)] datafile index ic using (1 + jit($0)):(column(col)) \
                 with points pt 7 ps 1.3 lc rgb correct_color, \
             for [k=1:(idx_incorrect >= 0)] datafile index ii using (2 + jit($0)):(column(col)) \
                 with points pt 7 ps 1.3 lc rgb incorrect_color
        unset label
    }
}
unset multiplot
