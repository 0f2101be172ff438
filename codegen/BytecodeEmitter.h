//===- BytecodeEmitter.h - Memory-explicit IR to VM bytecode ------*- C++ -*-===//
//
// Turns a module in the explicit-memory form that manifest-memory produces
// into a vm::Executable (Nimble paper §4; the `sum_up` listing of the Relay VM
// slides shows the same mapping):
//
//   SSA values            -> registers, shared by values never live at
//                            once (linear scan; params first)
//   blocks and branches   -> Goto / If, with parallel moves into the target
//                            block's argument registers
//   match                 -> Switch on the constructor tag, then GetField
//                            into the case block's arguments
//   call / ret            -> Invoke / Ret (recursion is ordinary Invoke)
//   construct / tuple     -> AllocADT;  get_tuple -> GetField
//   constant, @global     -> LoadConsti (scalar i64) / LoadConst (pool)
//   alloc_storage, alloc_tensor, storage_size, shape_of, kill
//                         -> AllocStorage, AllocTensor[Reg], StorageSize,
//                            ShapeOf, FreeTensor / FreeStorage
//   invoke_mut / invoke_shape_func @prim
//                         -> InvokePacked / ShapeFunc of the kernel
//                            made from primitive function @prim; an
//                            invoke_mut of one scalar i64 add / sub / mul /
//                            min / max / comparison (a loop counter) ->
//                            ScalarI64, no kernel
//   reshape, dyn_reshape  -> ReshapeTensor (a view)
//
// Every instruction records the .nir location of its op, so run-time errors
// point at the model source.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_CODEGEN_BYTECODEEMITTER_H
#define NIMBLE_CODEGEN_BYTECODEEMITTER_H

#include "ir/IR.h"
#include "vm/format/Executable.h"

#include <map>
#include <vector>

namespace nimble::codegen {

/// The bytes of each module constant (external weights loaded by the caller,
/// inline literals expanded), keyed by the Global.
using GlobalData = std::map<const ir::Global *, std::vector<uint8_t>>;

/// Emits `m`. Reports unsupported constructs (an op that was not lowered)
/// through `diag` at the op and returns failure.
ir::LogicalResult emitExecutable(const ir::Module &m, const GlobalData &globals,
                                 vm::Executable &out, ir::DiagnosticEngine &diag);

/// The constant-pool bytes of a literal: its elements, or for a splat of
/// more than one element the one element (vm::ConstantDesc::splat).
std::vector<uint8_t> constantBytes(const DenseValue &v);

} // namespace nimble::codegen

#endif // NIMBLE_CODEGEN_BYTECODEEMITTER_H
