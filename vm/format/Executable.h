//===- Executable.h - The in-memory form of a .nbc executable -----*- C++ -*-===//
//
// What nimblec produces and nimble-run loads (Nimble paper §4): functions of
// VM bytecode, a constant pool (weights), a kernel table, the algebraic data
// types and signatures needed to check inputs, and a map from instructions to
// .nir source locations so run-time errors point at the model source.
//
// The compiler fills an Executable and serializes it (Format.h); the runtime
// deserializes and verifies it. This header and Format.h are the only parts of
// vm/ the compiler may include (ARCHITECTURE.md: codegen uses "vm/ format
// headers only"); neither depends on anything but the shared op table.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_EXECUTABLE_H
#define NIMBLE_VM_EXECUTABLE_H

#include "ir/OpTable.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nimble::vm {

enum class Opcode : uint8_t {
#define VM_OPCODE(Name, Sig, Meaning) Name,
#include "vm/format/Opcodes.def"
};
inline constexpr int kNumOpcodes = 0
#define VM_OPCODE(...) +1
#include "vm/format/Opcodes.def"
    ;

struct OpcodeInfo {
  Opcode op;
  const char *name;
  const char *signature; // see Opcodes.def
  const char *meaning;
};
const OpcodeInfo &opcodeInfo(Opcode op);

/// The operation of a ScalarI64 instruction (its `op` immediate; part of the
/// format). Arithmetic wraps (two's complement), as the kernels do.
enum class ScalarOp : uint32_t { Add, Sub, Mul, Eq, Ne, Lt, Le, Gt, Ge, Min, Max };
inline constexpr uint32_t kNumScalarOps = 11;
/// "add", "sub", ... ("<invalid>" past the last).
const char *scalarOpName(uint32_t op);
/// Whether `op` compares (an i1 result) rather than computes (an i64 one).
inline bool scalarOpCompares(uint32_t op) { return op >= 3 && op <= 8; }

enum class Device : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDevices = 2;
const char *deviceName(Device d);

/// A type as the runtime needs it: to check inputs and to read ADT inputs.
struct TypeDesc {
  enum class Kind : uint8_t { Tensor, Tuple, Adt, Storage };
  Kind kind = Kind::Tensor;
  DType dtype = DType::F32;        // Tensor
  std::vector<int64_t> dims;       // Tensor; kDynamic for `?`
  uint32_t adt = 0;                // Adt: index into Executable::adts
  std::vector<TypeDesc> elems;     // Tuple
  bool operator==(const TypeDesc &o) const {
    return kind == o.kind && dtype == o.dtype && dims == o.dims && adt == o.adt &&
           elems == o.elems;
  }
};

struct AdtDesc {
  struct Ctor {
    std::string name;
    std::vector<TypeDesc> fields;
  };
  std::string name;
  std::vector<Ctor> ctors; // the tag of a constructor is its index
};

/// A constant-pool tensor. In a loaded executable `data` points into the
/// executable's buffer (64-byte aligned, never copied).
///
/// A splat (format 1.8) stores one element for a shape of more than one:
/// `size` is one element's bytes and every element of the tensor is that
/// one. The VM makes the dense tensor when a function first loads it
/// (VirtualMachine::constant), so a `constant 1.0 : tensor<2000x1000xf32>`
/// costs 4 bytes in the file and a huge one fails at run time with the
/// LoadConst's location, not in the compiler (issue 51).
struct ConstantDesc {
  std::string name; // the .nir constant (`w_ih`), or "" for an anonymous literal
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  uint64_t size = 0; // bytes
  bool splat = false;

  /// Whether `size` bytes for `shape` of `dtype` is the splat form: one
  /// element for a shape of more than one (no zero dim; some dim above 1).
  static bool isSplatForm(DType dtype, const std::vector<int64_t> &shape, uint64_t size) {
    bool more = false;
    for (int64_t d : shape) {
      if (d <= 0) return false;
      more |= d > 1;
    }
    return more && size == dtypeSize(dtype);
  }
};

/// An instruction's .nir source location.
struct SourceLoc {
  uint32_t pc = 0;   // word offset of the instruction
  uint32_t file = 0; // string-table index
  uint32_t line = 0, col = 0;
};

/// A kernel: one primitive function of the compiled module (a single op, or a
/// fused group), as a short list of member ops over numbered values. Values
/// 0..numInputs-1 are the kernel's inputs; member results are numbered after
/// them in order. The reference implementation evaluates the members one by
/// one; faster implementations register against the kernel's name. Its shape
/// function is the composition of the members' shape functions (paper §3.2).
struct KernelDesc {
  struct Member {
    OpCode op = OpCode::Add;
    std::vector<Attr> attrs; // in the op's schema order
    std::vector<uint32_t> operands;
    uint32_t numResults = 1;
  };
  std::string name;
  uint32_t numInputs = 0;
  std::vector<Member> members;
  std::vector<uint32_t> outputs; // value numbers of the kernel's outputs
  /// Upper-bound kernels (a lone unique / nonzero) take one extra output: a
  /// 1-D i64 tensor receiving the true shape of output 0.
  bool upperBound = false;
  /// Element types of the inputs: InvokeShapeFunc receives shapes, not the
  /// tensors, and the member relations check dtypes.
  std::vector<DType> inputDTypes;
  /// Where each member was written (format 1.1, the kernel-locs section):
  /// empty, or one per member; `pc` is unused and line 0 means unknown. A
  /// run-time error inside a kernel of several members (a fused group) is
  /// reported at the failing member's location.
  std::vector<SourceLoc> memberLocs;
};

struct VMFunction {
  std::string name;
  std::vector<std::string> paramNames;
  std::vector<TypeDesc> paramTypes;
  std::vector<TypeDesc> resultTypes;
  uint32_t numRegisters = 0; // parameters occupy registers 0..params-1
  std::vector<uint32_t> code;
  std::vector<SourceLoc> sourceMap; // sorted by pc
  /// Format 1.7 (the site-locs section): the member locations of the kernel
  /// calls whose members were written elsewhere than the kernel's own
  /// (kernel-locs). Fuse gives identical groups one primitive function; each
  /// call keeps its group's locations here, keyed by the pc of its
  /// InvokePacked, ShapeFunc or InvokeShapeFunc. Sorted by pc; a site's
  /// locations are siteMemberLocs[first, first + count), count being its
  /// kernel's member count.
  struct Site {
    uint32_t pc = 0;
    uint32_t first = 0;
    uint32_t count = 0;
  };
  std::vector<Site> sites;
  std::vector<SourceLoc> siteMemberLocs;
  /// The site of the call at `pc`, or null when it has no own locations.
  const Site *siteAt(uint32_t pc) const;
  /// The location of member `member` of the kernel that the instruction at
  /// `pc` calls, when that call has its own (null otherwise).
  const SourceLoc *siteMemberLoc(uint32_t pc, size_t member) const;
};

/// Native code for some kernels (format 1.2, the optional native-code
/// section): one ELF shared object that nimblec built for one CPU, and the
/// kernel each of its exported symbols implements (vm/KernelABI.h). It is
/// trusted code, like a shared library (docs/VM.md): the verifier checks the
/// table (kernel indices, symbol names, sizes), not the machine code, and
/// `nimble-run --kernels=reference` never maps it.
struct NativeCode {
  struct Entry {
    uint32_t kernel = 0; // index into Executable::kernels
    std::string symbol;  // exported by `object`
  };
  std::string triple;                // e.g. x86_64-unknown-linux-gnu
  std::string cpu;                   // e.g. znver3
  std::vector<std::string> features; // CPU features the code needs (avx2, fma, ...)
  std::vector<Entry> entries;        // sorted by kernel, at most one per kernel
  std::vector<uint8_t> object;       // the shared object's bytes
  bool empty() const { return entries.empty(); }
};

/// Device code for the CUDA kernels (format 1.3, the optional cuda-code
/// section): the PTX nimblec generated for one GPU architecture and, when
/// ptxas was present at compile time, the cubin it assembled from it (else
/// the driver JIT-compiles the PTX at load). Each entry says how nimble-run
/// runs one kernel on the device: a generated kernel entry (launched on a
/// grid the runtime computes from the run-time sizes, one block unless the
/// kernel is marked multi-block), or a cuBLAS call. Trusted code like the
/// native-code section: the verifier checks the table, not the code.
struct CudaCode {
  enum class Kind : uint8_t {
    Generated = 0,     // `symbol` is a .entry of the PTX / cubin
    CublasGemm = 1,    // a lone f32 matmul: cublasSgemm
    CublasBatched = 2, // a lone f32 batch_matmul: cublasSgemmStridedBatched
  };
  static constexpr uint8_t kNumKinds = 3;
  // flags (at most one of them):
  static constexpr uint8_t kMultiBlock = 1;     // may run on any number of blocks: ceil(n / 256) for n output elements
  static constexpr uint8_t kBlockPerOutput = 2; // a block per output element (a row reduction)
  static constexpr uint8_t kBlockPerRow = 4;    // a block per row of the output's last axis (softmax, layer_norm)
  static constexpr uint8_t kLaunchFlags = kMultiBlock | kBlockPerOutput | kBlockPerRow;
  struct Entry {
    uint32_t kernel = 0; // index into Executable::kernels
    Kind kind = Kind::Generated;
    uint8_t flags = 0;
    std::string symbol; // Generated: the entry's name; empty otherwise
  };
  std::string arch;           // sm_80, sm_90
  std::string ptx;            // the module's PTX text (never empty)
  std::vector<uint8_t> cubin; // ptxas's ELF for `arch`; empty: PTX only
  std::vector<Entry> entries; // sorted by kernel, at most one per kernel
  bool empty() const { return entries.empty(); }
};
/// How the auto-batching scheduler may run a kernel's calls from several
/// instances together (format 1.4, the optional batching section; written by
/// the auto-batch pass, docs/autobatch.md). Seed 001 (ACROBAT) §5.1: the
/// static taint analysis decides which inputs every instance shares.
struct KernelBatching {
  enum class Mode : uint8_t {
    None = 0,      // each call runs on its own
    Rows = 1,      // per-instance inputs are stacked along axis 0 and the
                   // `batched` variant runs once on the stack
    Invariant = 2, // every input is shared: one call computes every
                   // instance's outputs (instance-invariant hoisting)
  };
  Mode mode = Mode::None;
  uint32_t batched = 0;        // Rows: kernel index of the batched variant
  std::vector<uint8_t> shared; // per input: 1 shared by all instances, 0 per instance
  /// Format 1.10 (the batch-phases section): the program phase of the
  /// kernel's calls, seed 001 §4.1: the scheduler runs no call of phase k
  /// while a call of a lower phase is pending. 0 for kernels that do not batch.
  uint32_t phase = 0;
};
inline constexpr uint32_t kNumBatchingModes = 3;
const char *batchingModeName(KernelBatching::Mode m);

struct Executable {
  static constexpr uint16_t kMajor = 1, kMinor = 10;
  uint16_t major = kMajor, minor = kMinor;
  std::vector<std::string> strings;
  std::vector<AdtDesc> adts;
  std::vector<ConstantDesc> constants;
  std::vector<KernelDesc> kernels;
  std::vector<VMFunction> functions;
  NativeCode native; // format 1.2; empty: reference kernels only
  CudaCode cuda;     // format 1.3; empty: no device code
  /// Format 1.4: empty, or one entry per kernel.
  std::vector<KernelBatching> batching;
  /// Keeps the bytes that constants point into alive (set by the reader; the
  /// compiler owns its constant data through `ownedData`).
  std::shared_ptr<const void> buffer;
  /// Set by readExecutableFile when `buffer` is a read-only private mapping
  /// of the file (vm/format/Format.h, "Reading"): the mapped bytes. Pages in
  /// it may be dropped (releaseMappedPages) and are read from the file again
  /// if touched. Null otherwise (bytes read into memory, a compiler's own).
  const uint8_t *mappedBegin = nullptr, *mappedEnd = nullptr;
  std::vector<std::vector<uint8_t>> ownedData;

  int findFunction(const std::string &name) const;
  uint32_t internString(const std::string &s);
};

} // namespace nimble::vm

#endif // NIMBLE_VM_EXECUTABLE_H
