// The soak (app/measure/soak.h): the scripted drag over a recording (the replay backend: no GPU),
// the samples, the CSV written and read back, the plot, and the figures of the report.
#include "app/measure/soak.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "model/file_io.h"
#include "kernels/catalog.h"

namespace fl {
namespace {

namespace fs = std::filesystem;

TEST(Soak, ReadsThisProcesssResidentMemory) {
  const int64_t kib = process_rss_kib();
  EXPECT_GT(kib, 1024) << "VmRSS of a running test is more than 1 MiB";
  EXPECT_EQ(process_rss_kib(-5), -1) << "no such process";
}

TEST(Soak, CatalogSeriesCoverEveryLessonPrecisionAndCacheMode) {
  const auto all = catalog_soak_series(0, true);
  EXPECT_EQ(all.size(), lessons().size() * 4);
  const auto no_bf16 = catalog_soak_series(int64_t(1) << 20, false);
  EXPECT_EQ(no_bf16.size(), lessons().size() * 2);
  for (const SoakSeries& s : no_bf16) {
    EXPECT_EQ(s.precision, Precision::fp32);
    EXPECT_LE(s.max_size, int64_t(1) << 20);
    EXPECT_LE(s.min_size, s.max_size);
  }
}

TEST(Soak, DragsARecordingAndWritesTheCsvAndThePlot) {
  std::unique_ptr<ReplayBackend> recording;
  const std::string rec = FUSIONLAB_SHIPPED_RECORDING;
  ASSERT_TRUE(load_recording({rec}, &recording).ok());
  const std::vector<SoakSeries> series = recorded_soak_series(recording->summary());
  ASSERT_GE(series.size(), 4u);
  Engine engine([&recording](std::unique_ptr<MeasureBackend>* out) {
    *out = std::move(recording);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(10000));
  SoakOptions o;
  o.minutes = 3.0 / 60;  // 3 s
  o.sample_seconds = 0.5;
  o.requests_per_second = 100;
  o.steps_per_drag = 5;
  o.rest_ms = 50;
  int seen = 0;
  const SoakResult r = run_soak(
      &engine, series, o, [] { return 700.0; }, [&](const SoakSample&) { ++seen; });
  ASSERT_GE(r.samples.size(), 6u);
  EXPECT_EQ(seen, static_cast<int>(r.samples.size())) << "each sample is shown as it is taken";
  EXPECT_GT(r.results, 10);
  EXPECT_EQ(r.failed, 0) << (r.first_failures.empty() ? "" : r.first_failures[0]);
  EXPECT_EQ(r.samples.back().results, r.results);
  for (const SoakSample& s : r.samples) EXPECT_GT(s.rss_kib, 0);

  const fs::path dir = fs::temp_directory_path() / ("fl_soak_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string csv = (dir / "soak.csv").string(), svg = (dir / "soak.svg").string();
  ASSERT_TRUE(write_file_atomically(csv, soak_csv(r.samples)).ok());
  ASSERT_TRUE(write_file_atomically(svg, soak_svg(r.samples, "test <soak> & co")).ok());
  std::string text;
  ASSERT_TRUE(read_file_checked(csv, kMaxSmallFileBytes, "soak CSV", &text).ok());
  std::vector<SoakSample> back;
  ASSERT_TRUE(parse_soak_csv(text, &back).ok());
  ASSERT_EQ(back.size(), r.samples.size());
  EXPECT_EQ(back.back().rss_kib, r.samples.back().rss_kib);
  EXPECT_DOUBLE_EQ(back.back().gpu_used_mib, 700.0);
  std::string picture;
  ASSERT_TRUE(read_file_checked(svg, kMaxSmallFileBytes, "soak SVG", &picture).ok());
  EXPECT_NE(picture.find("<svg"), std::string::npos);
  EXPECT_NE(picture.find("test &lt;soak&gt; &amp; co"), std::string::npos) << "title escaped";
  EXPECT_NE(picture.find("GPU memory in use"), std::string::npos);
  EXPECT_NE(picture.find("<polyline"), std::string::npos);
  EXPECT_NE(picture.rfind("</svg>"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Soak, SummaryComparesTheFirstMinuteWithTheEnd) {
  std::vector<SoakSample> samples;
  for (int i = 0; i <= 30; ++i) {  // 10 s apart: minute 1 is sample 6
    SoakSample s;
    s.elapsed_s = 10.0 * i;
    s.rss_kib = i < 6 ? 100 * 1024 : 200 * 1024 + (i - 6) * 1024;  // 200 MiB, +1 MiB a sample
    s.gpu_used_mib = i == 3 ? 750 : 760;
    s.results = 10 * i;
    s.failed = i > 20 ? 1 : 0;
    samples.push_back(s);
  }
  const SoakSummary sum = summarize_soak(samples);
  EXPECT_DOUBLE_EQ(sum.rss_first_minute_mib, 200.0);
  EXPECT_DOUBLE_EQ(sum.rss_end_mib, 224.0);
  EXPECT_DOUBLE_EQ(sum.rss_change_percent, 12.0);
  EXPECT_DOUBLE_EQ(sum.gpu_min_mib, 750.0);
  EXPECT_DOUBLE_EQ(sum.gpu_max_mib, 760.0);
  EXPECT_EQ(sum.results, 300);
  EXPECT_EQ(sum.failed, 1);
  const std::string report = soak_report(sum);
  EXPECT_NE(report.find("(+12.00%)"), std::string::npos) << report;
  EXPECT_NE(report.find("min 750 MiB, max 760 MiB"), std::string::npos) << report;
  EXPECT_NE(report.find("300 results, 1 failed"), std::string::npos) << report;
}

TEST(Soak, ABrokenCsvIsRefusedWithItsLine) {
  std::vector<SoakSample> out;
  EXPECT_FALSE(parse_soak_csv("time,rss\n1,2\n", &out).ok());
  const Status st = parse_soak_csv(
      "elapsed_s,rss_kib,gpu_used_mib,results,failed\n0,100,,0,0\n5,abc,,1,0\n", &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("line 3"), std::string::npos) << st.message();
  EXPECT_FALSE(parse_soak_csv("elapsed_s,rss_kib,gpu_used_mib,results,failed\n", &out).ok());
  ASSERT_TRUE(
      parse_soak_csv("elapsed_s,rss_kib,gpu_used_mib,results,failed\n0,100,,0,0\n10,101,5.5,2,0\n",
                     &out)
          .ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_LT(out[0].gpu_used_mib, 0);
  EXPECT_DOUBLE_EQ(out[1].gpu_used_mib, 5.5);
}

TEST(SoakCycles, TheGridTakesEachSeriesSizesOnce) {
  SoakSeries recorded;
  recorded.lesson = "gelu_scale";
  recorded.sizes = {1024, 4096, 16384, 65536, 262144};
  recorded.min_size = 1024;
  recorded.max_size = 262144;
  SoakSeries axis = recorded;
  axis.sizes.clear();
  axis.cache = CacheMode::warm;
  const std::vector<MeasureRequest> grid = cycle_requests({recorded, axis}, 3);
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(grid[0].size, 1024);  // a recording's own sizes: first, middle, last
  EXPECT_EQ(grid[1].size, 16384);
  EXPECT_EQ(grid[2].size, 262144);
  EXPECT_EQ(grid[3].size, 1024);  // log-spaced over the axis
  EXPECT_EQ(grid[4].size, 16384);
  EXPECT_EQ(grid[5].size, 262144);
  EXPECT_EQ(grid[5].cache, CacheMode::warm);
  EXPECT_EQ(cycle_requests({recorded}, 99).size(), 5u) << "no size twice";
}

TEST(SoakCycles, WalksARecordingInCyclesAndWritesTheCsvAndThePlot) {
  std::unique_ptr<ReplayBackend> recording;
  const std::string rec = FUSIONLAB_SHIPPED_RECORDING;
  ASSERT_TRUE(load_recording({rec}, &recording).ok());
  const std::vector<MeasureRequest> grid =
      cycle_requests(recorded_soak_series(recording->summary()), 2);
  ASSERT_GE(grid.size(), 8u);
  EngineOptions eo;
  eo.counter_rest_ms = 10;
  Engine engine(
      [&recording](std::unique_ptr<MeasureBackend>* out) {
        *out = std::move(recording);
        return Status::Ok();
      },
      eo);
  ASSERT_TRUE(engine.wait_idle(10000));
  CycleOptions o;
  o.cycles = 4;
  CycleProbes probes;
  probes.gpu_used_mib = [] { return 700.0; };
  std::vector<int> seen;
  const SoakResult r = run_soak_cycles(&engine, grid, o, probes,
                                       [&](const SoakSample& s) { seen.push_back(s.cycle); });
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4})) << "one sample before, one per cycle's end";
  EXPECT_EQ(r.failed, 0) << (r.first_failures.empty() ? "" : r.first_failures[0]);
  EXPECT_EQ(r.results, static_cast<int64_t>(4 * grid.size())) << "every request answered once";
  ASSERT_EQ(r.samples.size(), 5u);
  for (const SoakSample& s : r.samples) {
    EXPECT_GT(s.rss_kib, 1024);
    EXPECT_GT(s.heap_kib, 0) << "mallinfo2";
    EXPECT_GT(s.rss_anon_kib, 0);
    EXPECT_EQ(s.gpu_used_mib, 700.0);
  }
  const CycleSummary sum = summarize_cycles(r.samples);
  EXPECT_EQ(sum.cycles, 4);
  EXPECT_EQ(sum.results, r.results);
  EXPECT_EQ(sum.gpu_from_mib, 700.0);
  // The CSV, read back, and the plot.
  const std::string csv = soak_csv(r.samples);
  EXPECT_EQ(csv.rfind("cycle,elapsed_s,rss_kib,rss_anon_kib,rss_file_kib,heap_kib,gpu_used_mib,"
                      "cupti_buffers_mib,results,failed\n",
                      0),
            0u);
  std::vector<SoakSample> back;
  ASSERT_TRUE(parse_soak_csv(csv, &back).ok());
  ASSERT_EQ(back.size(), r.samples.size());
  EXPECT_EQ(back[3].cycle, 3);
  EXPECT_EQ(back[3].heap_kib, r.samples[3].heap_kib);
  EXPECT_EQ(back[3].cupti_buffers_mib, -1) << "not sampled: an empty cell";
  const std::string svg = soak_svg(r.samples, "cycles");
  EXPECT_NE(svg.find(">cycle</text>"), std::string::npos);
  EXPECT_NE(svg.find("Heap in use"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos) << "the bound from cycle 2 on";
}

TEST(SoakCycles, TheSummaryJudgesGrowthFromTheEndOfCycleTwo) {
  std::vector<SoakSample> samples;
  const double rss_mib[] = {100, 700, 820, 820.5, 821.0, 821.4};  // cycles 0..5
  for (int c = 0; c <= 5; ++c) {
    SoakSample s;
    s.cycle = c;
    s.rss_kib = static_cast<int64_t>(rss_mib[c] * 1024);
    s.heap_kib = 50 * 1024;
    s.gpu_used_mib = c < 2 ? 600 : 900;
    s.results = 100 * c;
    samples.push_back(s);
  }
  CycleSummary sum = summarize_cycles(samples);
  EXPECT_EQ(sum.cycles, 5);
  EXPECT_NEAR(sum.rss_per_cycle_mib, 1.4 / 3, 1e-3);  // KiB rounding
  EXPECT_TRUE(sum.within_bound);
  samples.back().gpu_used_mib = 901;  // GPU memory may not grow at all
  EXPECT_FALSE(summarize_cycles(samples).within_bound);
  samples.back().gpu_used_mib = 900;
  samples.back().rss_kib = static_cast<int64_t>(824.0 * 1024);  // 1.33 MiB a cycle
  sum = summarize_cycles(samples);
  EXPECT_FALSE(sum.within_bound);
  EXPECT_NE(cycle_report(sum).find("MEMORY GREW PAST THE BOUND"), std::string::npos);
  samples.resize(3);  // cycles 0..2: too few to judge
  EXPECT_FALSE(summarize_cycles(samples).within_bound);
}

}  // namespace
}  // namespace fl
