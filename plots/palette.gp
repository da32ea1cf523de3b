# palette.gp - one colour, point type and dash per policy, the same in every
# figure.  Colours are the Okabe-Ito colour-blind-safe set plus a few dark
# tones; the proposed method (skipkv) gets the strongest one.  A policy not
# listed here takes a colour from `fallback_rgb` by its series number.
#
#   policy_rgb(p, i)    colour as an integer 0xRRGGBB (for `lc rgb variable`)
#   policy_color(p, i)  the same as a "#rrggbb" string (for `lc rgb ...`)
#   policy_pt(p, i)     point type
#   policy_dt(p)        dash type: FullKV is dashed, everything else solid
#   policy_name(p)      the name shown in legends
#   correct_color / incorrect_color   for correct vs incorrect traces

fallback_rgb(i) = (i % 6 == 0) ? 0x332288 : (i % 6 == 1) ? 0x882255 : (i % 6 == 2) ? 0x44AA99 : \
                  (i % 6 == 3) ? 0xDDCC77 : (i % 6 == 4) ? 0x88CCEE : 0x999933

policy_rgb(p, i) = \
    (p eq 'fullkv')            ? 0x000000 : \
    (p eq 'streamingllm')      ? 0x999999 : \
    (p eq 'h2o')               ? 0xE69F00 : \
    (p eq 'snapkv')            ? 0x56B4E9 : \
    (p eq 'rkv')               ? 0x0072B2 : \
    (p eq 'skipkv')            ? 0xD55E00 : \
    (p eq 'skipkv-full')       ? 0xD55E00 : \
    (p eq 'skipkv-sent')       ? 0xCC79A7 : \
    (p eq 'skipkv-sent-steer') ? 0x009E73 : \
    (p eq 'seal')              ? 0x8C564B : \
    (p eq 'seal-static')       ? 0x8C564B : \
    (p eq 'vase')              ? 0x117733 : \
    (p eq 'beaconkv')          ? 0xAA4499 : fallback_rgb(i)

policy_color(p, i) = sprintf('#%06x', policy_rgb(p, i))

policy_pt(p, i) = \
    (p eq 'fullkv')            ? 4 : \
    (p eq 'streamingllm')      ? 12 : \
    (p eq 'h2o')               ? 9 : \
    (p eq 'snapkv')            ? 11 : \
    (p eq 'rkv')               ? 5 : \
    (p eq 'skipkv')            ? 7 : \
    (p eq 'skipkv-full')       ? 7 : \
    (p eq 'skipkv-sent')       ? 13 : \
    (p eq 'skipkv-sent-steer') ? 15 : \
    (p eq 'seal')              ? 3 : \
    (p eq 'seal-static')       ? 3 : \
    (p eq 'vase')              ? 10 : \
    (p eq 'beaconkv')          ? 8 : 1 + (i % 6)

policy_dt(p) = (p eq 'fullkv') ? 2 : 1

policy_name(p) = \
    (p eq 'fullkv')            ? 'FullKV' : \
    (p eq 'streamingllm')      ? 'StreamingLLM' : \
    (p eq 'h2o')               ? 'H2O' : \
    (p eq 'snapkv')            ? 'SnapKV' : \
    (p eq 'rkv')               ? 'R-KV' : \
    (p eq 'skipkv')            ? 'SkipKV' : \
    (p eq 'skipkv-full')       ? 'SkipKV' : \
    (p eq 'skipkv-sent')       ? 'SkipKV (sentence only)' : \
    (p eq 'skipkv-sent-steer') ? 'SkipKV (no grouping)' : \
    (p eq 'seal')              ? 'SEAL' : \
    (p eq 'seal-static')       ? 'static steering' : \
    (p eq 'vase')              ? 'VASE' : \
    (p eq 'beaconkv')          ? 'BeaconKV' : p

correct_color = '#009E73'
incorrect_color = '#D55E00'
