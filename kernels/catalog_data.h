// The lesson catalog as data, for the replay-only build (docs/DEVELOPING.md, "The replay-only
// build"). The lessons live in .cu files that need the CUDA toolkit; a build without it still
// needs what the window and the exports read from a lesson: its info() and its textbook
// traffic(). The full build writes both as JSON (`fusionlab lessons --json`, committed as
// assets/lessons/catalog.json, checked against the kernels by a test) and the replay-only build
// compiles that file in and reads it back here. Plain C++: no CUDA header.
//
// Traffic as data: every launch's bytes read, bytes written and FLOPs are, in every lesson, a
// polynomial in the size s (along the size axis) and the row length i (the resolved Shape::inner)
// with the terms 1, s, i, s*i, i^2 and s*i^2 (a GEMM's weights are i*3i; its FLOPs 2*s*i*3i).
// catalog_to_json fits those terms from traffic() at six shapes and checks the fit at others, so
// a lesson whose traffic takes another form fails here, with its name, instead of being
// written down wrong.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/lesson.h"
#include "kernels/status.h"

namespace fl {

// The catalog version written as "catalog_version"; catalog_from_json refuses others.
constexpr int kCatalogVersion = 1;

// `lessons` as the catalog JSON (2-space indented, keys sorted, no trailing newline).
Status catalog_to_json(const std::vector<const Lesson*>& lessons, std::string* out);

// Lessons rebuilt from catalog JSON: info() and traffic() give what the full build's lessons
// gave; they cannot run (create_workspace fails saying this build has no CUDA, reference() is
// empty). Fails with one sentence on malformed input.
Status catalog_from_json(const std::string& text, std::vector<std::unique_ptr<Lesson>>* out);

}  // namespace fl
