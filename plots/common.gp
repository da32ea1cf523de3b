# common.gp - terminal, fonts, data format and axes shared by every figure.
#
# Variables set by the caller (harness/report/plots.c passes them with gnuplot -e):
#   fmt       'png' (pngcairo) or 'svg'
#   out       output file
#   datafile  the panel's tab-separated data (NULL = not measured)
#   title1, title2   the two title lines (what, model, dataset / setting, sampling)
#   wide      set to 1 before loading for side-by-side panels
#   plotdir   where the scripts are
#   palette   the palette evictbench writes from the policy registry
#             (results/plots/data/palette.gp: policy_rgb, policy_pt, policy_dt,
#             policy_name; `evictbench plots` passes it)
#   pol<i>, suf<i>   series i's policy and the rest of its legend entry
# No display is needed: only the pngcairo and svg terminals are used.

if (!exists("fmt")) fmt = 'png'
if (!exists("out")) out = 'figure.' . fmt
if (!exists("wide")) wide = 0
if (!exists("title1")) title1 = ''
if (!exists("title2")) title2 = ''
if (!exists("plotdir")) plotdir = 'plots'
if (!exists("palette")) palette = 'results/plots/data/palette.gp'

# Colours for a policy without its own (by series number: Paul Tol's set), and
# for correct vs incorrect traces.  Policies' own colours: the palette.
fallback_rgb(i) = (i % 6 == 0) ? 0x332288 : (i % 6 == 1) ? 0x882255 : (i % 6 == 2) ? 0x44AA99 : \
                  (i % 6 == 3) ? 0xDDCC77 : (i % 6 == 4) ? 0x88CCEE : 0x999933
correct_color = '#009E73'
incorrect_color = '#D55E00'
load palette

# series i: its policy and its legend entry ("R-KV, budget 64")
pol(i) = value(sprintf('pol%d', i))
tit(i) = policy_name(pol(i)) . value(sprintf('suf%d', i))

if (fmt eq 'svg') {
    set terminal svg size (wide ? 1500 : 1000), 660 dynamic noenhanced \
        font 'DejaVu Sans,16' linewidth 1.5 background '#ffffff'
} else {
    set terminal pngcairo size (wide ? 2250 : 1500), 990 noenhanced \
        font 'DejaVu Sans,22' linewidth 2.5 background '#ffffff'
}
set output out

set datafile separator "\t"
set datafile missing 'NULL'
# every block of a data file starts with its column names: scripts read columns by name
set datafile columnheaders
set encoding utf8

set border 3 lw 1.2
set tics nomirror out scale 0.7
set style line 100 lc rgb '#dddddd' lw 1 dt solid
set grid xtics ytics ls 100, ls 100 back
set key below center horizontal Left reverse samplen 2.5 spacing 1.1 width 1.5 maxrows 3
set pointsize 1.6
set title title1 . "\n" . title2
