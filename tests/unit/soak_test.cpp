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
  const std::string rec = (fs::path(__FILE__).parent_path().parent_path().parent_path() / "assets" /
                           "recordings" / "h100-2026-11-23")
                              .string();
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

}  // namespace
}  // namespace fl
