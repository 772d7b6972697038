// What code holding only a Workspace may ask of a gpt2_decode workspace (plain C++): the
// megakernel's task list (the timeline's hover names a task record's `arg` from it), its phase
// sink (one record per task), the number of blocks it runs on (the partial-grid test) and how
// it moves its bytes (the variants compared in one run).
// Each returns an error when `ws` is not a gpt2_decode workspace. The setters are the task list's
// (level 4's variant "task_list"): each forces that variant on the workspace, so that level 4
// runs it at one token too, where the table would choose the cluster step.
#pragma once

#include "kernels/gpt2_decode/model.h"
#include "kernels/lesson.h"
#include "kernels/phases.h"

namespace fl {
namespace gpt2 {

// The task list level 4 runs, and the shape it was built for; null for another lesson's.
const DecodeTaskList* megakernel_tasks(const Workspace& ws, TaskListShape* shape = nullptr);
// Where level 4 writes its task records (phases.h: phase = TaskKind, arg = task index).
Status set_megakernel_phases(Workspace& ws, const PhaseSink& sink);
// How level 4 moves a task's bytes (megakernel_options.h's MegakernelOptions); rebuilds the task
// list.
Status set_megakernel_options(Workspace& ws, const MegakernelOptions& options);
// Where level 4 adds up where its tasks' time goes (model.h's ProbeSlot): probe_words(blocks)
// 64-bit words, zeroed by the caller before each run; null turns the probes off.
Status set_megakernel_probes(Workspace& ws, unsigned long long* probes);
// Rebuilds the task list for `blocks` persistent blocks (1 .. one per SM).
Status set_megakernel_blocks(Workspace& ws, int blocks);
// The clusters of 8 blocks level 4's cluster step (variants "clusters" and "clusters_long",
// launch.h) runs on with this GPU; 0: it cannot run here, and level 4 runs the task list.
Status megakernel_cluster_count(int* clusters);

}  // namespace gpt2
}  // namespace fl
