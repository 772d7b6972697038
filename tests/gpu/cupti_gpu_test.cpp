// Both CUPTI phases on real kernels. These check the plumbing, not speed: every launch gets
// exactly one kernel record with its real grid and block, the records are one repetition of the
// statistics, counters arrive for every launch, and a large cold fused GELU reads from DRAM the
// bytes its input holds (a wrong range-to-launch mapping or a flush counted as a launch would
// miss that by a factor).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cmath>
#include <thread>

#include "app/measure/engine.h"
#include "app/measure/live_backend.h"
#include "kernels/catalog.h"
#include "kernels/gpt2_decode/model.h"

namespace fl {
namespace {

std::unique_ptr<LiveBackend> make_backend(LiveOptions options = LiveOptions()) {
  options.min_repetitions = 5;
  options.target_seconds = 0.02;
  std::unique_ptr<LiveBackend> backend;
  const Status st = LiveBackend::create(options, &backend);
  EXPECT_TRUE(st.ok()) << st.message();
  return backend;
}

// The GPU machine runs as root with no other profiler: both CUPTI parts must be in use there.
// Elsewhere a degraded mode is legitimate, and these tests say which one they met.
bool cupti_in_use(const LiveBackend& backend) {
  EXPECT_TRUE(backend.timing_note().empty()) << backend.timing_note();
  return std::string(backend.timing_method()) == "cupti_activity";
}

// Grid of an elementwise launch: one thread per 16-byte vector plus one per tail element.
int elementwise_blocks(int64_t n, Precision p) {
  const int64_t per_vector = 16 / bytes_per_element(p);
  return static_cast<int>((n / per_vector + n % per_vector + 255) / 256);
}

// One repetition's records: at least one kernel per launch (a cuBLASLt call may run two, e.g.
// a split-K GEMM and its reduction), in launch order on one stream.
void expect_records_are_one_repetition(const Measurement& m) {
  ASSERT_GE(m.records.size(), m.launches.size())
      << m.lesson << " level " << m.level << ": a record for every launch";
  std::vector<int> per_launch(m.launches.size(), 0);
  std::vector<double> launch_us(m.launches.size(), 0.0);  // first kernel's start to last's end
  std::vector<uint64_t> first_start(m.launches.size(), 0), last_end(m.launches.size(), 0);
  uint32_t previous_correlation = 0;
  for (size_t k = 0; k < m.records.size(); ++k) {
    const KernelRecord& r = m.records[k];
    ASSERT_GE(r.launch, 0);
    ASSERT_LT(r.launch, static_cast<int>(m.launches.size()));
    if (k > 0) EXPECT_GE(r.launch, m.records[k - 1].launch) << "records follow the launch order";
    if (per_launch[r.launch]++ == 0) first_start[r.launch] = r.start_ns;
    last_end[r.launch] = r.end_ns;
    EXPECT_FALSE(r.kernel.empty());
    EXPECT_GT(r.end_ns, r.start_ns);
    EXPECT_EQ(r.end_rel_ns - r.start_rel_ns, static_cast<int64_t>(r.end_ns - r.start_ns));
    EXPECT_EQ(r.stream_id, m.records[0].stream_id) << "one stream";
    // A CUDA graph's kernels share its launch's correlation id, and with programmatic
    // dependent launch they overlap by design (gpt2_decode's graph levels): within one launch
    // the ids only never fall and a kernel only never starts before the one before it.
    const bool same_launch = k > 0 && r.launch == m.records[k - 1].launch;
    if (same_launch) {
      EXPECT_GE(r.correlation_id, previous_correlation) << "launched in order";
      EXPECT_GE(r.start_ns, m.records[k - 1].start_ns) << "one stream starts them in turn";
    } else {
      EXPECT_GT(r.correlation_id, previous_correlation) << "launched in order";
      if (k > 0) EXPECT_GE(r.start_ns, m.records[k - 1].end_ns) << "one stream runs them in turn";
    }
    previous_correlation = r.correlation_id;
    EXPECT_GE(r.grid[0], 1);
    EXPECT_GE(r.block[0] * r.block[1] * r.block[2], 1);
    EXPECT_LE(r.block[0] * r.block[1] * r.block[2], 1024);
    EXPECT_GT(r.registers_per_thread, 0);
  }
  for (size_t k = 0; k < m.launches.size(); ++k) {
    ASSERT_GE(per_launch[k], 1) << m.launches[k].textbook.kernel << " has no record";
    // The kept repetition is one of the samples: its durations lie within the statistics.
    const double us = (last_end[k] - first_start[k]) * 1e-3;
    const Stats& t = m.launches[k].time_us;
    EXPECT_GE(us, t.min - 1e-3);
    EXPECT_LE(us, t.max + 1e-3);
    EXPECT_GT(t.median, 0);
    EXPECT_LT(t.median, 1e6) << "a launch of these sizes takes well under a second";
  }
  EXPECT_EQ(m.records.front().start_rel_ns, 0);
  const double chain_us = (m.records.back().end_ns - m.records.front().start_ns) * 1e-3;
  EXPECT_GE(chain_us, m.chain_time_us.min - 1e-3);
  EXPECT_LE(chain_us, m.chain_time_us.max + 1e-3);
}

TEST(CuptiTiming, RecordsMapOneToOneToLaunchesWithTheirGridAndBlock) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(cupti_in_use(*backend));
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    if (!precision_unsupported_reason(p, backend->device().cc_major, backend->device().cc_minor)
             .empty())
      continue;
    for (CacheMode cache : {CacheMode::cold, CacheMode::warm}) {
      const int64_t n = 1000003;  // not a multiple of the vector width: a tail thread or three
      std::vector<Measurement> ms;
      const Status st = backend->measure({"gelu_scale", n, {}, p, cache}, nullptr, &ms);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_EQ(ms.size(), 2u);
      for (const Measurement& m : ms) {
        EXPECT_EQ(m.timing_method, "cupti_activity");
        EXPECT_TRUE(m.check.passed);
        EXPECT_GE(m.repetitions, 5);
        expect_records_are_one_repetition(m);
        for (const KernelRecord& r : m.records) {
          EXPECT_EQ(r.grid[0], elementwise_blocks(n, p)) << r.kernel;
          EXPECT_EQ(r.grid[1], 1);
          EXPECT_EQ(r.block[0], 256) << r.kernel;
          EXPECT_EQ(r.block[1], 1);
        }
      }
      EXPECT_EQ(ms[0].records.size(), 2u);  // unfused: gelu, then scale
      EXPECT_EQ(ms[1].records.size(), 1u);  // fused
    }
  }
  EXPECT_EQ(backend->order_matched_repetitions(), 0)
      << "every kernel record came back with the external correlation id of its launch";
}

TEST(CuptiTiming, EveryLessonAndLevelGetsItsRecords) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(cupti_in_use(*backend));
  for (const Lesson* lesson : lessons()) {
    const SizeAxis& axis = lesson->info().size_axis;
    const int64_t size = axis.inner_default > 0 ? 333 : 100003;  // rows or elements, odd
    std::vector<Measurement> ms;
    const Status st = backend->measure(
        {lesson->info().id, size, {}, lesson->info().precisions.front(), CacheMode::cold}, nullptr,
        &ms);
    ASSERT_TRUE(st.ok()) << lesson->info().id << ": " << st.message();
    ASSERT_EQ(ms.size(), static_cast<size_t>(lesson->level_count()));
    for (const Measurement& m : ms) expect_records_are_one_repetition(m);
  }
}

TEST(CuptiTiming, CompareTimersAndTheEventsFallback) {
  LiveOptions both;
  both.compare_timers = true;
  auto backend = make_backend(both);
  ASSERT_TRUE(backend);
  ASSERT_TRUE(cupti_in_use(*backend));
  std::vector<Measurement> ms;
  ASSERT_TRUE(
      backend->measure({"gelu_scale", 1 << 22, {}, Precision::fp32, CacheMode::cold}, nullptr, &ms)
          .ok());
  for (const Measurement& m : ms) {
    EXPECT_EQ(m.timing_method, "cupti_activity");
    EXPECT_EQ(m.event_chain_time_us.count, m.chain_time_us.count);
    for (const LaunchResult& l : m.launches) EXPECT_GT(l.event_time_us.median, 0);
  }
  backend.reset();

  LiveOptions events;
  events.timer = Timer::events;
  backend = make_backend(events);
  ASSERT_TRUE(backend);
  ms.clear();
  ASSERT_TRUE(
      backend->measure({"gelu_scale", 4097, {}, Precision::fp32, CacheMode::cold}, nullptr, &ms)
          .ok());
  for (const Measurement& m : ms) {
    EXPECT_EQ(m.timing_method, "cuda_events");
    EXPECT_TRUE(m.records.empty()) << "no CUPTI records without CUPTI";
    EXPECT_GT(m.chain_time_us.median, 0);
  }
}

TEST(CuptiCounters, PresentAndPositiveForEveryLaunch) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(backend->counters_available()) << backend->counters_note();
  EXPECT_GE(backend->counter_passes(), 1);
  for (CacheMode cache : {CacheMode::cold, CacheMode::warm}) {
    const MeasureRequest request{"residual_layernorm", 1000, {}, Precision::fp32, cache};
    std::vector<Measurement> ms;
    ASSERT_TRUE(backend->measure(request, nullptr, &ms).ok());
    const Status st = backend->measure_counters(request, nullptr, &ms);
    ASSERT_TRUE(st.ok()) << st.message();
    for (const Measurement& m : ms) {
      EXPECT_EQ(m.counters_status, CountersStatus::measured) << m.counters_note;
      for (const LaunchResult& l : m.launches) {
        ASSERT_TRUE(l.counters.has_value()) << l.textbook.kernel;
        EXPECT_GE(l.counters->dram_write_bytes, 0);
        EXPECT_GT(l.counters->l2_bytes, 0) << l.textbook.kernel;
        // Every byte a kernel reads passes through L2.
        EXPECT_GE(l.counters->l2_bytes, l.textbook.bytes_read / 2) << l.textbook.kernel;
      }
      if (cache == CacheMode::cold) {
        EXPECT_GT(m.launches[0].counters->dram_read_bytes, 0)
            << "cold: the first launch reads DRAM";
      }
    }
  }
}

TEST(CuptiCounters, LargeColdFusedGeluReadsItsInputFromDram) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(backend->counters_available()) << backend->counters_note();
  // At least 4x L2 per tensor so the textbook count is what DRAM must deliver.
  int64_t n = int64_t(64) << 20;
  while (n * 4 < 4 * backend->device().l2_bytes) n *= 2;
  const MeasureRequest request{"gelu_scale", n, {1}, Precision::fp32, CacheMode::cold};
  std::vector<Measurement> ms;
  Status st = backend->measure(request, nullptr, &ms);
  ASSERT_TRUE(st.ok()) << st.message();
  st = backend->measure_counters(request, nullptr, &ms);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(ms.size(), 1u);
  const LaunchResult& fused = ms[0].launches.at(0);
  ASSERT_TRUE(fused.counters.has_value());
  const double read = fused.counters->dram_read_bytes, textbook = fused.textbook.bytes_read;
  EXPECT_NEAR(read / textbook, 1.0, 0.10)
      << "DRAM read " << read << " B, textbook " << textbook << " B";
  EXPECT_GE(fused.counters->l2_bytes,
            0.9 * (fused.textbook.bytes_read + fused.textbook.bytes_written));
}

// cuBLASLt GEMMs through both phases, at a small batch (where cuBLASLt may split K over two
// kernels) and the default shape: every launch gets counters (a launch's kernels summed), and a
// cold GEMM reads at least its weights from DRAM (they cannot be in L2 after the flush).
TEST(CuptiCounters, GemmLaunchesGetTheirKernelsCounted) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(backend->counters_available()) << backend->counters_note();
  for (int64_t tokens : {int64_t(64), int64_t(16384)}) {
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      const MeasureRequest request{"linear_gelu", tokens, {}, p, CacheMode::cold};
      std::vector<Measurement> ms;
      Status st = backend->measure(request, nullptr, &ms);
      ASSERT_TRUE(st.ok()) << st.message();
      st = backend->measure_counters(request, nullptr, &ms);
      ASSERT_TRUE(st.ok()) << st.message();
      const int64_t weight_bytes = int64_t(768) * 3072 * bytes_per_element(p);
      for (const Measurement& m : ms) {
        SCOPED_TRACE("tokens " + std::to_string(tokens) + " " + to_string(p) + " level " +
                     std::to_string(m.level));
        EXPECT_TRUE(m.check.passed) << m.check.rel_l2_error;
        expect_records_are_one_repetition(m);
        ASSERT_EQ(m.counters_status, CountersStatus::measured) << m.counters_note;
        const LaunchResult& gemm = m.launches.at(0);
        ASSERT_TRUE(gemm.counters.has_value());
        EXPECT_GE(gemm.counters->dram_read_bytes, 0.9 * weight_bytes) << gemm.textbook.kernel;
        EXPECT_GE(gemm.counters->l2_bytes, gemm.textbook.bytes_read) << gemm.textbook.kernel;
      }
    }
  }
}

// A chain longer than one pass of the range profiler counts (16 ranges): GPT-2's decode step op
// by op is 205 kernels, fused 61, counted a window of launches at a time; the megakernel is one.
// Each of those levels gets counters for every launch and, cold, reads at least the step's
// weights (170 MB, far beyond L2) from DRAM once: a range mapped to the wrong launch or a window
// lost would miss bytes. The graph levels (one launch of 61 kernels) are left out with a note.
TEST(CuptiCounters, ALongChainIsCountedLaunchByLaunch) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(backend->counters_available()) << backend->counters_note();
  const MeasureRequest request{"gpt2_decode", 511, {}, Precision::bf16, CacheMode::cold};
  std::vector<Measurement> ms;
  Status st = backend->measure(request, nullptr, &ms);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(ms.size(), 5u);
  ASSERT_GT(ms[0].launches.size(), 64u) << "level 0 is the long chain";
  st = backend->measure_counters(request, nullptr, &ms);
  ASSERT_TRUE(st.ok()) << st.message();
  const double weight_bytes = 2.0 * gpt2::kWeightElements;
  for (const Measurement& m : ms) {
    SCOPED_TRACE("level " + std::to_string(m.level));
    if (m.level == 2 || m.level == 3) {
      EXPECT_EQ(m.counters_status, CountersStatus::not_measured);
      EXPECT_NE(m.counters_note.find("CUDA graph"), std::string::npos) << m.counters_note;
      continue;
    }
    ASSERT_EQ(m.counters_status, CountersStatus::measured) << m.counters_note;
    int64_t read = 0;
    for (const LaunchResult& l : m.launches) {
      ASSERT_TRUE(l.counters.has_value()) << l.textbook.kernel;
      EXPECT_GT(l.counters->l2_bytes, 0) << l.textbook.kernel;
      read += l.counters->dram_read_bytes;
    }
    EXPECT_GE(read, 0.97 * weight_bytes) << "the weights come from DRAM once";
    EXPECT_LE(read, 1.5 * weight_bytes) << "and not many times";
    std::printf("gpt2_decode 511 level %d: %zu launches, DRAM read %.1f MB\n", m.level,
                m.launches.size(), read * 1e-6);
  }
}

TEST(CuptiCounters, AnAbandonedPhaseLeavesTheProfilerUsable) {
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(backend->counters_available()) << backend->counters_note();
  const MeasureRequest request{"gelu_scale", 1 << 20, {}, Precision::fp32, CacheMode::cold};
  std::vector<Measurement> ms;
  ASSERT_TRUE(backend->measure(request, nullptr, &ms).ok());
  int checks = 0;
  auto newer_request_after_one_launch = [&] { return ++checks > 1; };
  ASSERT_TRUE(backend->measure_counters(request, newer_request_after_one_launch, &ms).ok());
  EXPECT_NE(ms[0].counters_status, CountersStatus::measured) << "abandoned between launches";
  EXPECT_FALSE(ms[0].launches[0].counters.has_value());
  const Status st = backend->measure_counters(request, nullptr, &ms);
  ASSERT_TRUE(st.ok()) << st.message();
  for (const Measurement& m : ms) EXPECT_EQ(m.counters_status, CountersStatus::measured);
}

TEST(CuptiCounters, TimingAfterACounterPhaseStillHasItsRecords) {
  // The profiler is enabled only during a counter phase; kernel records taken afterwards must
  // still carry timestamps.
  auto backend = make_backend();
  ASSERT_TRUE(backend);
  ASSERT_TRUE(cupti_in_use(*backend));
  ASSERT_TRUE(backend->counters_available()) << backend->counters_note();
  const MeasureRequest request{"gelu_scale", 3 << 20, {}, Precision::fp32, CacheMode::cold};
  for (int round = 0; round < 2; ++round) {
    std::vector<Measurement> ms;
    ASSERT_TRUE(backend->measure(request, nullptr, &ms).ok());
    for (const Measurement& m : ms) {
      EXPECT_EQ(m.timing_method, "cupti_activity")
          << "round " << round << ": " << backend->timing_note();
      expect_records_are_one_repetition(m);
    }
    const Status st = backend->measure_counters(request, nullptr, &ms);
    ASSERT_TRUE(st.ok()) << st.message();
    for (const Measurement& m : ms) EXPECT_EQ(m.counters_status, CountersStatus::measured);
  }
}

TEST(CuptiEngine, TimingThenCountersThroughTheEngine) {
  Engine engine([](std::unique_ptr<MeasureBackend>* out) {
    std::unique_ptr<LiveBackend> live;
    LiveOptions options;
    options.min_repetitions = 5;
    options.target_seconds = 0.02;
    FL_TRY(LiveBackend::create(options, &live));
    *out = std::move(live);
    return Status::Ok();
  });
  ASSERT_TRUE(engine.wait_idle(60000));
  ASSERT_EQ(engine.status().state, EngineState::ready) << engine.status().unavailable_reason;
  ASSERT_TRUE(engine.status().counters_note.empty()) << engine.status().counters_note;
  const uint64_t id = engine.submit({"gelu_scale", 1 << 20, {}, Precision::fp32, CacheMode::cold});
  ASSERT_TRUE(engine.wait_idle(60000));
  const auto results = engine.poll();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].phase, EnginePhase::timing);
  EXPECT_EQ(results[1].phase, EnginePhase::counters);
  for (const EngineResult& r : results) {
    EXPECT_EQ(r.id, id);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_EQ(r.measurements.size(), 2u);
  }
  for (const Measurement& m : results[1].measurements) {
    EXPECT_EQ(m.counters_status, CountersStatus::measured) << m.counters_note;
    EXPECT_EQ(m.records.size(), m.launches.size()) << "the timing travels with the counters";
    EXPECT_GT(m.chain_time_us.median, 0);
  }
}

}  // namespace
}  // namespace fl
