//===- DotGraph.h - A module's graphs in Graphviz --------------------*- C++ -*-===//
//
// `nimble-opt --emit=dot` and `nimblec --emit=dot` (LLVM's -view-cfg, TVM's
// graph dumps): one `digraph` per module, one `subgraph cluster_*` per
// function, in three views (--dot-graph=):
//
//  cfg       blocks as nodes (the block's header and its ops, elided past a
//            few), branch edges labelled by the condition's side (cond_br
//            true/false), the constructor (match) and the values passed to
//            the target's arguments; back edges bold. Natural loops
//            (passes/analysis/Loops.h) are nested clusters, so a loop nest
//            reads as boxes in boxes.
//  dataflow  ops as nodes, SSA def-use edges (and dashed edges from a
//            branch to the block arguments it feeds); each block of a
//            function with several blocks a cluster. A call or invoke_mut of
//            a primitive function (a fused group: the fuse pass outlines
//            each group into one) is drawn as a cluster holding the group's
//            ops, wired to the caller's values: the kernels as the fusion
//            policy formed them.
//  memory    the memory plan as a timeline (passes/memory/MemoryTimeline.cpp):
//            storages, and the tensors placed in them at their offsets,
//            against the function's ops in order.
//
// Labels are Graphviz quoted strings (`"` and `\` escaped, lines ended by
// `\l`) or, for the timeline, HTML-like labels (`&`, `<`, `>`, `"`
// escaped): names and types hold `<`, `>` and quotes.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_ANALYSIS_DOTGRAPH_H
#define NIMBLE_PASSES_ANALYSIS_DOTGRAPH_H

#include "ir/IR.h"

#include <string>
#include <string_view>

namespace nimble::passes {

enum class DotGraphKind { Cfg, Dataflow, Memory };

/// `cfg`, `dataflow` or `memory`; false for anything else.
bool parseDotGraphKind(std::string_view text, DotGraphKind &kind);

/// The Graphviz text of `m` in view `kind`.
std::string printDot(const ir::Module &m, DotGraphKind kind);

/// `s` as the inside of a Graphviz quoted string: `"` and `\` escaped,
/// each line ended by `\l` (left-justified), other control characters as
/// spaces.
std::string dotEscape(std::string_view s);
/// `s` for an HTML-like label: `&`, `<`, `>`, `"` as entities.
std::string htmlEscape(std::string_view s);
/// An identifier for a cluster or node made from `s` (letters, digits, `_`).
std::string dotId(std::string_view s);

/// The memory view of one function (passes/memory/MemoryTimeline.cpp).
void printMemoryTimeline(const ir::Function &f, unsigned funcIndex, std::string &out);

} // namespace nimble::passes

#endif // NIMBLE_PASSES_ANALYSIS_DOTGRAPH_H
