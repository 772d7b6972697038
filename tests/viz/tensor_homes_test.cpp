// What stayed on chip is the counters' verdict (viz/tensor_homes.h), checked on the shipped H100
// recordings: the fused FFN at 16K tokens wrote h through HBM, and the flow view draws it there
// and says so; the same kernel with DRAM bytes at the textbook count keeps it on chip; an
// L2-sized intermediate of the unfused chain is said to stay in L2, not to round-trip via HBM.
#include "viz/tensor_homes.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/catalog.h"
#include "model/session_json.h"
#include "viz/flow_view.h"
#include "viz/memory_chart.h"

#ifndef FUSIONLAB_SOURCE_DIR
#error "FUSIONLAB_SOURCE_DIR must name the source tree"
#endif

namespace fl::viz {
namespace {

const ImVec2 kMin(0, 0), kMax(1400, 520);  // tall: the where-note row is drawn

Session recording(const std::string& name) {
  Session s;
  const Status st = load_session(std::string(FUSIONLAB_SHIPPED_RECORDING) + "/" + name, &s);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

const Measurement& find(const Session& s, const std::string& lesson, int64_t size, int level) {
  for (const Measurement& m : s.measurements) {
    if (m.lesson == lesson && m.size == size && m.level == level) return m;
  }
  ADD_FAILURE() << lesson << " " << size << " level " << level << " not recorded";
  static const Measurement none;
  return none;
}

const TensorPlace* place(const TensorHomes& h, const std::string& name) {
  for (const TensorPlace& t : h.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool has_block(const FlowInput& in, const FlowLayout& l, const std::string& name, FlowPlace where) {
  return std::any_of(l.blocks.begin(), l.blocks.end(), [&](const FlowBlock& b) {
    return b.place == where && in.tensors[b.tensor].name == name;
  });
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The recorded counters replaced by exactly the textbook bytes: no extra DRAM traffic.
Measurement at_textbook(Measurement m) {
  for (auto& l : m.launches) {
    l.counters->dram_read_bytes = l.textbook.bytes_read;
    l.counters->dram_write_bytes = l.textbook.bytes_written;
  }
  return m;
}

TEST(TensorHomes, FusedFfnAt16KTokensWroteHThroughHbm) {
  const Session s = recording("gemm_bf16_cold.json");
  const Measurement& m2 = find(s, "ffn", 16384, 2);
  const Measurement& m0 = find(s, "ffn", 16384, 0);
  const Lesson* ffn = find_lesson("ffn");
  ASSERT_NE(ffn, nullptr);
  const TensorHomes h = tensor_homes(m2, ffn, &m0);
  ASSERT_TRUE(h.measured);
  // About 120 MiB written against a 24 MiB output: 96 MiB beyond the textbook, h's size.
  EXPECT_NEAR(h.extra_write_bytes / (96.0 * (1 << 20)), 1.0, 0.02);
  const TensorPlace* gelu = place(h, "gelu output");
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->design, TensorHome::on_chip);
  EXPECT_EQ(gelu->measured, TensorHome::hbm);
  EXPECT_NE(gelu->sentence.find("went through HBM"), std::string::npos) << gelu->sentence;
  // The sentence quotes the level's measured writes (120.1 MiB in the 2026-11-23 recording).
  EXPECT_NE(gelu->sentence.find("writes " + format_byte_count(h.dram_write_bytes)),
            std::string::npos)
      << gelu->sentence;
  // Only one tensor of h's size is accounted for by the extra bytes.
  const int moved = static_cast<int>(std::count_if(h.tensors.begin(), h.tensors.end(),
                                                   [](const TensorPlace& t) { return t.moved(); }));
  EXPECT_EQ(moved, 1);

  // The view's model: h is a block in HBM, the SM box no longer keeps it, the caption and the
  // note say so with the level table's reason.
  const FlowInput in = flow_input(m2, ffn, s.device, &m0);
  EXPECT_TRUE(contains(in.moved, "gelu output"));
  EXPECT_FALSE(contains(in.on_chip, "gelu output"));
  const FlowLayout l = layout_flow(in, 0.5, kMin, kMax);
  EXPECT_TRUE(has_block(in, l, "gelu output", FlowPlace::hbm));
  EXPECT_NE(l.caption.find("went through HBM"), std::string::npos) << l.caption;
  EXPECT_NE(l.where_note_full.find(ffn->info().levels[2].on_chip), std::string::npos)
      << l.where_note_full;
  EXPECT_FALSE(l.moved_lines.empty());
  // The caption and the status line name the kernel variant that ran.
  ASSERT_FALSE(m2.launches[0].variant.empty());
  EXPECT_NE(l.caption.find("(ran " + m2.launches[0].variant + ")"), std::string::npos) << l.caption;
  EXPECT_NE(l.status.find("ffn_fused (" + m2.launches[0].variant + ")"), std::string::npos)
      << l.status;
  // The running launch's write band carries the measured bytes.
  ASSERT_EQ(l.trip, 0);
  EXPECT_DOUBLE_EQ(l.lanes[1].dram.bytes,
                   static_cast<double>(m2.launches[0].counters->dram_write_bytes));
  // The memory chart says it too.
  EXPECT_NE(memory_input(m2, m0).where.find("gelu output went through HBM"), std::string::npos);
}

TEST(TensorHomes, FusedFfnWithTextbookBytesKeepsHOnChip) {
  const Session s = recording("gemm_bf16_cold.json");
  const Measurement m2 = at_textbook(find(s, "ffn", 16384, 2));
  const Measurement& m0 = find(s, "ffn", 16384, 0);
  const Lesson* ffn = find_lesson("ffn");
  const TensorHomes h = tensor_homes(m2, ffn, &m0);
  ASSERT_TRUE(h.measured);
  const TensorPlace* gelu = place(h, "gelu output");
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->measured, TensorHome::on_chip);
  EXPECT_FALSE(h.any_moved());
  EXPECT_TRUE(h.headline.empty());
  const FlowInput in = flow_input(m2, ffn, s.device, &m0);
  EXPECT_TRUE(contains(in.on_chip, "gelu output"));
  EXPECT_TRUE(in.moved.empty());
  const FlowLayout l = layout_flow(in, 0.5, kMin, kMax);
  EXPECT_FALSE(has_block(in, l, "gelu output", FlowPlace::hbm));
  EXPECT_EQ(l.caption.find("HBM"), std::string::npos) << l.caption;
  EXPECT_TRUE(l.where_note.empty());
}

TEST(TensorHomes, RecordedLayerNormLinearAt16KKeepsItsNormalizedRowsOnChip) {
  const Session s = recording("gemm_bf16_cold.json");
  const Measurement& m2 = find(s, "layernorm_linear", 16384, 2);
  const Measurement& m0 = find(s, "layernorm_linear", 16384, 0);
  const TensorHomes h = tensor_homes(m2, find_lesson("layernorm_linear"), &m0);
  ASSERT_TRUE(h.measured);
  ASSERT_FALSE(h.tensors.empty());
  EXPECT_FALSE(h.any_moved());
  for (const TensorPlace& t : h.tensors) EXPECT_EQ(t.measured, TensorHome::on_chip) << t.name;
}

TEST(TensorHomes, RecordedFp32FfnAt16KTokensAlsoWentThroughHbm) {
  const Session s = recording("gemm_fp32_cold.json");
  const Measurement& m2 = find(s, "ffn", 16384, 2);
  const TensorHomes h = tensor_homes(m2, find_lesson("ffn"), &find(s, "ffn", 16384, 0));
  const TensorPlace* gelu = place(h, "gelu output");
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->measured, TensorHome::hbm);
}

TEST(TensorHomes, RingBufferAt1KTokensIsWrittenBackButReadFromL2) {
  const Session s = recording("gemm_bf16_cold.json");
  const TensorHomes h =
      tensor_homes(find(s, "ffn", 1024, 2), find_lesson("ffn"), &find(s, "ffn", 1024, 0));
  const TensorPlace* gelu = place(h, "gelu output");
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->measured, TensorHome::l2);
  EXPECT_TRUE(gelu->written_back);
}

TEST(TensorHomes, EpilogueLevelsDirtyLinesCancelOverTheLevel) {
  // ffn level 1 at 16K: gemm_down_bias writes 20 MiB more than its output, the lines of h that
  // gemm_up_bias_gelu left dirty in L2; over the level the DRAM writes match the textbook.
  const Session s = recording("gemm_bf16_cold.json");
  const TensorHomes h =
      tensor_homes(find(s, "ffn", 16384, 1), find_lesson("ffn"), &find(s, "ffn", 16384, 0));
  EXPECT_LT(h.extra_write_bytes, 1.0 * (1 << 20));
  for (const TensorPlace& t : h.tensors) {
    if (!t.intermediate) EXPECT_EQ(t.measured, TensorHome::on_chip) << t.name;
  }
}

TEST(TensorHomes, GeluScaleAt16KStaysInL2AndTheCaptionSaysSo) {
  const Session s = recording("elementwise_fp32_cold.json");
  const Measurement& m0 = find(s, "gelu_scale", 16384, 0);
  const Lesson* lesson = find_lesson("gelu_scale");
  const TensorHomes h = tensor_homes(m0, lesson, &m0);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].name, "gelu output");
  EXPECT_EQ(h.tensors[0].measured, TensorHome::l2);
  EXPECT_FALSE(h.tensors[0].written_back);
  const FlowInput in = flow_input(m0, lesson, s.device, &m0);
  const FlowLayout l = layout_flow(in, 0.5, kMin, kMax);
  EXPECT_EQ(l.caption.find("round-trips through HBM"), std::string::npos) << l.caption;
  EXPECT_NE(l.caption.find("stays in L2"), std::string::npos) << l.caption;
  EXPECT_TRUE(has_block(in, l, "gelu output", FlowPlace::l2));
  EXPECT_FALSE(has_block(in, l, "gelu output", FlowPlace::hbm));

  // At 16M elements (64 MiB, over the 50 MiB L2) it does round-trip, and the summary stands.
  const Measurement& big = find(s, "gelu_scale", int64_t(1) << 24, 0);
  const TensorHomes hb = tensor_homes(big, lesson, &big);
  ASSERT_EQ(hb.tensors.size(), 1u);
  EXPECT_EQ(hb.tensors[0].measured, TensorHome::hbm);
  EXPECT_EQ(measured_summary(lesson->info().levels[0].summary, hb),
            lesson->info().levels[0].summary);
}

TEST(TensorHomes, WithoutCountersThePictureSaysItShowsTheDesign) {
  const Session s = recording("gemm_bf16_cold.json");
  Measurement m2 = find(s, "ffn", 16384, 2);
  for (auto& l : m2.launches) l.counters.reset();
  const Lesson* ffn = find_lesson("ffn");
  const TensorHomes h = tensor_homes(m2, ffn, nullptr);
  EXPECT_FALSE(h.measured);
  EXPECT_FALSE(h.any_moved());
  const FlowInput in = flow_input(m2, ffn, s.device, nullptr);
  const FlowLayout l = layout_flow(in, 0.5, kMin, kMax);
  EXPECT_NE(l.bytes_note.find("design"), std::string::npos) << l.bytes_note;
  EXPECT_NE(l.bytes_note.find("not a measurement"), std::string::npos) << l.bytes_note;
  ASSERT_FALSE(l.on_chip_lines.empty());
  EXPECT_NE(l.on_chip_lines[0].find("design"), std::string::npos) << l.on_chip_lines[0];
}

}  // namespace
}  // namespace fl::viz
