//===- Pipelines.cpp - The pass pipeline of each optimisation level -------===//

#include "passes/Pipelines.h"

namespace nimble::passes {

/// manifest-memory comes after the optimizations: it changes the calling
/// convention, which the other passes do not model (its kills would not
/// survive CSE). place-devices runs at every level, on the explicit-memory
/// IR (a no-op for --target=cpu), and plan-memory after it (it plans per
/// device).
///
/// auto-batch (docs/autobatch.md) ends the CPU pipelines of -O1 and up: it
/// adds a batched variant of each kernel that can run many instances' calls
/// at once, for nimble-run --instances; -O0 executables run instances one
/// call at a time.
///
/// dispatch (graph dispatch) comes first at -O1 and up and acts only on
/// functions that ask for it (`attributes {dispatch = [...]}`): every later
/// pass then sees its copies' static shapes.
///
/// matmul-reassociate (only with fpReassociate) runs once the calls are
/// inlined and the algebra canonical, so that it sees whole chains, and
/// before licm, which hoists the products of invariants it forms; the
/// canonicalize after it folds the static sizes of its run-time choice.
///
/// linalg-fuse (only with fpReassociate, -O2) runs after
/// batch-input-projection, which must see an RNN's input projection x·W
/// unfused (batched over all rows it beats any per-step fusion); the licm
/// after it hoists a concat of literal weights canonicalize did not fold.
///
/// fuse-attention runs at every level, right after type-infer: its kernel
/// rounds differently from the ops it replaces, and -O0 and -O2 must give
/// the same bits (passes/transforms/FuseAttention.cpp). The attention op has
/// no device form yet: for --target=cuda the pass is left out at every level
/// (the products go to cuBLAS and the softmax to a generated kernel, as
/// before), so -O0 and -O2 still agree there.
/// convert-layout (-O2 only: it changes no bits, docs/passes.md) runs just
/// before fuse, so that the channels-last convs are fused with their
/// post-ops; the canonicalize after it folds the transposes of constants.
std::string pipelineFor(int level, const std::string &target, bool batchRemarks, bool fpReassociate) {
  std::string reassociate = fpReassociate ? "matmul-reassociate,canonicalize,cse,dce," : "";
  std::string linalgFuse = fpReassociate ? "linalg-fuse,canonicalize,licm," : "";
  std::string place = ",place-devices{target=" + target + "}";
  std::string batch = target != "cpu" ? "" : batchRemarks ? ",auto-batch{remarks=true}" : ",auto-batch";
  // dynamic_update_slice, which distribution stacks rows with, has no device
  // form yet: on cuda the split loops would copy through the host.
  std::string distribute = target != "cpu" ? "" : "loop-distribute,";
  std::string attention = target != "cpu" ? "" : "fuse-attention,";
  // The channels-last forms run on the host kernels and oneDNN only.
  std::string layout = target != "cpu" ? "" : "convert-layout,canonicalize,";
  // Row cells (fuse's one kernel per recurrent cell) serve auto-batching,
  // which devices do not do, and would take lone products off cuBLAS
  // (passes/lowering/Fuse.cpp).
  std::string fuse = target != "cpu" ? "fuse{row-cells=false}" : "fuse";
  switch (level) {
  case 0: return "type-infer," + attention + "manifest-memory" + place;
  case 1: return "dispatch,type-infer," + attention + "canonicalize,cse,dce," + reassociate + "manifest-memory" + place + batch;
  default:
    return "dispatch,inline,type-infer," + attention + "canonicalize,cse,dce," + reassociate + "licm," + distribute +
           "batch-input-projection," + linalgFuse + layout + "cse,dce,type-infer," + fuse + ",manifest-memory{kills=false}" +
           place + ",plan-memory" + batch;
  }
}

} // namespace nimble::passes
