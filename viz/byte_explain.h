// Why a launch's measured bytes differ from its textbook bytes: the rules of
// assets/explain/byte_ratios.json applied to a measurement. Where a launch's DRAM reads, DRAM
// writes or L2 bytes differ from the textbook by more than the table's ratio (1.5x) either way,
// the first rule whose counter, direction and tests all hold gives the sentence; a ratio no rule
// explains is "unexplained". The rules are data (a teacher can read and extend the table); the
// tests they name are the predicates below, computed from the measurement and its neighbours.
//
// Tests a rule may name:
//   reads_resident           the launch reads what the launch before it wrote (and that fits in
//                            L2), or runs in warm mode on inputs that fit in L2
//   writes_fit_in_l2         its textbook writes fit in L2
//   kept_value_moved         a value the level table keeps on chip went through HBM in this
//                            launch (viz/tensor_homes.h): sets {tensor} and {tensor_bytes}
//   pending_dirty_lines      earlier launches of the chain wrote less to DRAM than their
//                            textbook writes ({pending}), and this launch's writes are within the
//                            ratio of its textbook writes plus that
//   tiled_kernel             a GEMM-like kernel (gemm, ffn, linear, flash, attention in its name)
//   l2_requests_fills_floor  its L2 bytes are within the ratio of the textbook bytes plus its DRAM
//                            reads (the L2's fills) plus the recording's L2 floor ({l2_floor}:
//                            the fewest L2 bytes any launch of the measurements shows)
// Sentence fields: {measured} {textbook} {l2_capacity} {pending} {tensor} {tensor_bytes}
// {dram_read} {l2_floor}.
#pragma once

#include <string>
#include <vector>

#include "kernels/lesson.h"
#include "kernels/status.h"
#include "model/results.h"

namespace fl::viz {

struct ByteRule {
  std::string id;
  std::string counter;    // "dram_read", "dram_write" or "l2"
  std::string direction;  // "above" or "below" the textbook
  std::vector<std::string> tests;
  std::string says;
};

struct ByteRules {
  double ratio = 1.5;
  std::vector<ByteRule> rules;
};

// One-line refusals naming the rule and field ("rules[2].tests[0]: unknown test 'fits'").
Status parse_byte_rules(const std::string& json_text, ByteRules* out);
Status load_byte_rules(const std::string& path, ByteRules* out);

// What the rules may know beside the measurement.
struct ByteFacts {
  double l2_capacity = 0;               // bytes; 0: unknown
  double l2_floor = 0;                  // l2_floor() of the measurements around; 0: unknown
  const Lesson* lesson = nullptr;       // for kept_value_moved
  const Measurement* level0 = nullptr;  // the same, without the lesson
};

// The fewest L2 bytes any launch with counters shows among `ms` (0 when none has counters).
double l2_floor(const std::vector<Measurement>& ms);

struct ByteExplanation {
  int launch = 0;
  std::string kernel;
  std::string counter;  // "dram_read", "dram_write", "l2"
  double measured = 0, textbook = 0;
  std::string rule;      // the rule's id; empty: unexplained
  std::string sentence;  // the rule's, filled in; "unexplained" when no rule holds
  bool explained() const { return !rule.empty(); }
  // "scale: DRAM writes 182.5 KiB, 2.9x the textbook 64.0 KiB: dirty lines ..."
  std::string line() const;
};

// Every counter of every launch of `m` that is beyond the table's ratio, in launch order.
std::vector<ByteExplanation> explain_bytes(const ByteRules& rules, const Measurement& m,
                                           const ByteFacts& facts);

}  // namespace fl::viz
