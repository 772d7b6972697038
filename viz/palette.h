// The one colour language of every view and export (SVG): the Okabe-Ito palette, which stays
// distinguishable with every common colour-vision deficiency, given fixed roles. A colour means
// the same thing everywhere: sky blue is always bytes read, orange always bytes written, reddish
// purple always level 0 (the unfused chain), bluish green always the top (fully fused) level,
// yellow and blue the levels between, vermillion a compared recording; limits and references
// are neutral grey and dashed. docs/VIEWS.md ("The colour language") shows the table.
// No view defines a colour of its own: add a role here instead.
#pragma once

#include <imgui.h>

namespace fl::viz::palette {

// ---- [SECTION] Okabe-Ito (Okabe & Ito, "Color Universal Design", 2008) ------------------------
constexpr ImU32 okabe_orange = IM_COL32(230, 159, 0, 255);
constexpr ImU32 okabe_sky_blue = IM_COL32(86, 180, 233, 255);
constexpr ImU32 okabe_bluish_green = IM_COL32(0, 158, 115, 255);
constexpr ImU32 okabe_yellow = IM_COL32(240, 228, 66, 255);
constexpr ImU32 okabe_blue = IM_COL32(0, 114, 178, 255);
constexpr ImU32 okabe_vermillion = IM_COL32(213, 94, 0, 255);
constexpr ImU32 okabe_reddish_purple = IM_COL32(204, 121, 167, 255);

// ---- [SECTION] roles -------------------------------------------------------------------------
// Bytes: what a kernel reads (towards the SM) and writes (away from it), in the flow view, the
// memory chart and the timeline's read-outs. Textbook bytes are the same hue, lighter (alpha).
constexpr ImU32 reads = okabe_sky_blue;
constexpr ImU32 writes = okabe_orange;
// Fusion levels: level 0, every level between, the top (fully fused) level. level_color() picks.
constexpr ImU32 level0 = okabe_reddish_purple;
constexpr ImU32 level_between[2] = {okabe_yellow, okabe_blue};
constexpr ImU32 level_top = okabe_bluish_green;
// A second recording drawn over this one (File > Compare with..., a script's `compare`): dashed.
constexpr ImU32 compared = okabe_vermillion;
constexpr ImU32 compared_second = IM_COL32(236, 160, 110, 255);  // a lighter vermillion
// Reference and limit lines (byte-ratio limit, 1x, roofs, copy bandwidth) and published
// reference series: neutral grey, dashed lines, hollow markers.
constexpr ImU32 reference = IM_COL32(160, 160, 160, 255);
constexpr ImU32 reference_dim = IM_COL32(120, 120, 120, 255);
// A point measured on a shared or throttled GPU (model/gpu_conditions.h): a ring around it.
constexpr ImU32 disturbed = okabe_orange;
// PyTorch peers (scripts/peers.py: torch.compile, eager, eager in a CUDA graph) are reference
// series too: greys from light to dim, hollow markers; torch.compile, the one to beat, lightest.
constexpr ImU32 peers[3] = {IM_COL32(225, 225, 225, 255), IM_COL32(165, 165, 165, 255),
                            IM_COL32(115, 115, 115, 255)};
// What a kernel keeps on chip: registers (a fused level's intermediates) and shared memory / L1
// (rows and tiles a kernel stages there): the top level's green, and a neutral light tone.
constexpr ImU32 on_chip = okabe_bluish_green;
constexpr ImU32 shared_memory = IM_COL32(200, 200, 200, 255);
// L2: bytes requested from L2 (memory chart), reads that L2 served (flow view).
constexpr ImU32 l2 = okabe_blue;
// The correctness badge. Words carry the meaning ("correct", "WRONG"); colour only repeats it.
constexpr ImU32 correct = okabe_bluish_green;
constexpr ImU32 wrong = okabe_vermillion;
// A note that warns (textbook bytes shown because the counters are off, medians not records).
constexpr ImU32 warning = okabe_orange;
// The flow view's places: dim neutral fills that the coloured bytes stand out on.
constexpr ImU32 hbm_fill = IM_COL32(44, 46, 52, 255);
constexpr ImU32 l2_fill = IM_COL32(40, 48, 58, 255);
constexpr ImU32 sm_fill = IM_COL32(48, 48, 48, 255);
// Text drawn on a coloured bar (the timeline's kernel names).
constexpr ImU32 text_on_bar = IM_COL32(12, 12, 12, 255);
// SVG exports: a white page with dark text, so slides print.
constexpr ImU32 svg_background = IM_COL32(255, 255, 255, 255);
constexpr ImU32 svg_text = IM_COL32(20, 20, 20, 255);
constexpr ImU32 svg_grid = IM_COL32(220, 220, 220, 255);
constexpr ImU32 svg_axis = IM_COL32(90, 90, 90, 255);

// The colour of fusion level `level` of a lesson whose top level is `top`.
// Phase timelines: a kernel's declared phases, in declaration order, cycle through the seven
// Okabe-Ito hues (a kernel declares a handful; the hover names the phase whatever its colour).
constexpr ImU32 phase_cycle[7] = {okabe_sky_blue,      okabe_orange, okabe_bluish_green,
                                  okabe_yellow,        okabe_blue,   okabe_vermillion,
                                  okabe_reddish_purple};
inline ImU32 phase_color(int phase) {
  return phase_cycle[(phase < 0 ? 0 : phase) % 7];
}

inline ImU32 level_color(int level, int top) {
  if (level <= 0) return level0;
  if (level >= top) return level_top;
  return level_between[(level - 1) % 2];
}

}  // namespace fl::viz::palette
