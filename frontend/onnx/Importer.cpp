//===- Importer.cpp - ONNX models to Nimble IR ------------------------------===//
//
// The model-level work: reading the protobuf (bounded, so a hostile file is
// a message), the opset, tensors (inline fields, raw bytes, external-data
// files confined to the model's directory), graph inputs and their
// dim_params, initializers, the node walk with one scope per (sub-)graph, the
// control-flow nodes that need that walk (`If`, `Loop`), and the clean-up
// and verification of the result. The per-op conversions are in OpMap.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Importer.h"

#include "frontend/onnx/Convert.h"
#include "frontend/onnx/Graph.h"
#include "ir/Inference.h"
#include "ir/Limits.h"
#include "ir/Verifier.h"

#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace nimble::onnx_import {

using namespace ir;

namespace {

bool readFile(const std::string &path, std::string &out, std::string &error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) {
    error = "cannot read '" + path + "'";
    return false;
  }
  out = std::move(ss).str();
  return true;
}

std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

template <class T> void put(std::vector<uint8_t> &b, T v) {
  size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

} // namespace

//===-- Tensors --------------------------------------------------------------===//

/// Resolves an external-data `location` against the model's directory and
/// reads [offset, offset + length). The location must be a relative path
/// with no `..` component, and the file it names (symbolic links followed)
/// must lie inside the model's directory: a model must not read what its
/// author chooses on the importing machine.
bool GraphImporter::readExternal(const onnx::TensorProto &t, size_t want, std::vector<uint8_t> &out,
                                 std::string &error) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    char *end = nullptr;
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset" || kv.key() == "length") {
      errno = 0;
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end || errno || v < 0) {
        error = "external data of '" + t.name() + "': bad " + kv.key() + " '" + kv.value() + "'";
        return false;
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) {
    error = "external data of '" + t.name() + "' has no location";
    return false;
  }
  bool upward = location == ".." || location.rfind("../", 0) == 0 || location.find("/../") != std::string::npos ||
                (location.size() >= 3 && location.compare(location.size() - 3, 3, "/..") == 0);
  if (location[0] == '/' || upward || location.find('\0') != std::string::npos) {
    error = "external data of '" + t.name() + "': location '" + location +
            "' is outside the model's directory (it must be a relative path without '..')";
    return false;
  }
  std::string dir = dirOf(opts_.modelPath), path = dir + "/" + location;
  char *realDir = ::realpath(dir.c_str(), nullptr), *realFile = ::realpath(path.c_str(), nullptr);
  std::string rd = realDir ? realDir : "", rf = realFile ? realFile : "";
  std::free(realDir);
  std::free(realFile);
  if (rf.empty()) {
    error = "external data of '" + t.name() + "': cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  if (rd.empty() || rf.compare(0, rd.size() + 1, rd == "/" ? rd : rd + "/") != 0) {
    error = "external data of '" + t.name() + "': location '" + location +
            "' leads outside the model's directory (through a symbolic link)";
    return false;
  }
  struct stat st;
  if (::stat(rf.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "external data of '" + t.name() + "': '" + path + "' is not a regular file";
    return false;
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (length < 0) length = static_cast<int64_t>(size) - offset;
  if (static_cast<uint64_t>(offset) > size || static_cast<uint64_t>(length) > size - static_cast<uint64_t>(offset)) {
    error = "external data of '" + t.name() + "': bytes [" + std::to_string(offset) + ", " +
            std::to_string(offset + length) + ") lie past the end of '" + path + "' (" + std::to_string(size) +
            " bytes)";
    return false;
  }
  if (static_cast<uint64_t>(length) != want) {
    error = "external data of '" + t.name() + "' has " + std::to_string(length) + " bytes; its shape and type need " +
            std::to_string(want);
    return false;
  }
  std::ifstream f(rf, std::ios::binary);
  out.resize(want);
  f.seekg(offset);
  if (!f || !f.read(reinterpret_cast<char *>(out.data()), static_cast<std::streamsize>(want))) {
    error = "external data of '" + t.name() + "': cannot read '" + path + "'";
    return false;
  }
  return true;
}

bool GraphImporter::readTensor(const onnx::TensorProto &t, DenseValue &v, std::string &error) {
  std::optional<DType> dt = dtypeOf(t.data_type());
  if (!dt) {
    error = "tensor '" + t.name() + "' has element type " + onnxTypeName(t.data_type()) +
            ", which Nimble does not have (f32, f64, f16, bf16, bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64)";
    return false;
  }
  v = DenseValue();
  v.dtype = *dt;
  for (int64_t d : t.dims()) {
    if (d < 0) {
      error = "tensor '" + t.name() + "' has a negative dimension " + std::to_string(d);
      return false;
    }
    v.shape.push_back(d);
  }
  int64_t n = 0;
  if (v.shape.size() > limits::kMaxRank || !limits::checkedNumElements(v.shape, n)) {
    error = "tensor '" + t.name() + "' is larger than Nimble's limits (docs/LangRef.md#limits)";
    return false;
  }
  size_t es = dtypeSize(*dt);
  uint64_t bytes = 0;
  if (!limits::checkedMul(static_cast<uint64_t>(n), static_cast<uint64_t>(es), bytes) ||
      bytes > static_cast<uint64_t>(limits::kMaxTensorBytes)) {
    error = "tensor '" + t.name() + "' is larger than Nimble's limits (docs/LangRef.md#limits)";
    return false;
  }
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    return readExternal(t, bytes, v.bytes, error);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes) {
      error = "tensor '" + t.name() + "' has " + std::to_string(t.raw_data().size()) +
              " bytes of data; its shape and type need " + std::to_string(bytes);
      return false;
    }
    v.bytes.assign(t.raw_data().begin(), t.raw_data().end());
    if (*dt == DType::I1)
      for (uint8_t &b : v.bytes) b = b != 0;
    return true;
  }
  auto count = [&](int have) {
    if (have == n) return true;
    error = "tensor '" + t.name() + "' has " + std::to_string(have) + " elements; its shape needs " +
            std::to_string(n);
    return false;
  };
  // The typed field's length is checked before anything is reserved: the
  // dims are the file's word, and a tensor that claims gigabytes without
  // carrying them is an error, not an allocation (found by onnx-fuzzer).
  int have;
  switch (t.data_type()) {
  case onnx::TensorProto_DataType_FLOAT: have = t.float_data_size(); break;
  case onnx::TensorProto_DataType_DOUBLE: have = t.double_data_size(); break;
  case onnx::TensorProto_DataType_INT64: have = t.int64_data_size(); break;
  case onnx::TensorProto_DataType_UINT32:
  case onnx::TensorProto_DataType_UINT64: have = t.uint64_data_size(); break;
  default: have = t.int32_data_size(); break;
  }
  if (!count(have)) return false;
  v.bytes.reserve(bytes);
  switch (t.data_type()) {
  case onnx::TensorProto_DataType_FLOAT:
    for (float f : t.float_data()) put(v.bytes, f);
    return true;
  case onnx::TensorProto_DataType_DOUBLE:
    for (double f : t.double_data()) put(v.bytes, f);
    return true;
  case onnx::TensorProto_DataType_INT64:
    for (int64_t i : t.int64_data()) put(v.bytes, i);
    return true;
  case onnx::TensorProto_DataType_UINT32:
  case onnx::TensorProto_DataType_UINT64: // uint64_data carries both
    for (uint64_t u : t.uint64_data()) {
      if (*dt == DType::U32) put(v.bytes, static_cast<uint32_t>(u));
      else put(v.bytes, u);
    }
    return true;
  default: // int32_data carries int32, int16, int8, uint16, uint8, bool, and float16 / bfloat16 bits
    for (int32_t i : t.int32_data()) {
      if (*dt == DType::F16 || *dt == DType::BF16 || *dt == DType::U16) put(v.bytes, static_cast<uint16_t>(i));
      else if (*dt == DType::I16) put(v.bytes, static_cast<int16_t>(i));
      else if (*dt == DType::I32) put(v.bytes, i);
      else if (*dt == DType::I8) put(v.bytes, static_cast<int8_t>(i));
      else if (*dt == DType::U8) put(v.bytes, static_cast<uint8_t>(i));
      else put(v.bytes, static_cast<uint8_t>(i != 0));
    }
    return true;
  }
}

//===-- Names and values -----------------------------------------------------===//

std::string GraphImporter::valueName(const std::string &onnxName) {
  std::string s;
  for (char c : onnxName) s += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '_';
  return s.empty() ? "v" : s;
}

std::string GraphImporter::symbolName(const std::string &onnxName) {
  std::string base = valueName(onnxName);
  if (!std::isalpha(static_cast<unsigned char>(base[0])) && base[0] != '_') base = "_" + base;
  std::string s = base;
  for (int k = 1; m_.lookupGlobal(s); ++k) s = base + "_" + std::to_string(k);
  return s;
}

Value *GraphImporter::lookup(const std::string &name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (auto f = it->find(name); f != it->end()) return f->second;
  return nullptr;
}

void GraphImporter::bind(const std::string &name, Value *v) {
  scopes_.back()[name] = v;
  if (v->kind() == Value::Kind::OpResult && v->name().empty()) v->setName(valueName(name));
}

Location GraphImporter::nodeLoc() const {
  return {ctx_.intern(opts_.displayName), static_cast<uint32_t>(nodeNumber_), 1};
}

Value *GraphImporter::constant(DenseValue v) {
  // One `constant` per value: composites ask for the same 0.0 and 1.0 often.
  std::string key(reinterpret_cast<const char *>(v.bytes.data()), v.bytes.size());
  key += "|" + std::string(dtypeName(v.dtype)) + (v.splat ? "|s" : "|");
  for (int64_t d : v.shape) key += std::to_string(d) + "x";
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  Type t = ctx_.tensor(v.dtype, v.shape);
  std::vector<Attr> attrs = defaultAttrs(OpCode::Constant);
  attrs[0] = Attr::getDense(std::move(v));
  auto op = Operation::create(OpCode::Constant, nodeLoc(), {}, {t}, std::move(attrs));
  Block *entry = fn_->entry();
  Operation *before = lastConstant_ ? lastConstant_->nextOp() : entry->front();
  lastConstant_ = entry->insertBefore(before, std::move(op));
  return constants_[key] = lastConstant_->result();
}

Value *GraphImporter::derivedInitializer(const std::string &onnxName, DenseValue v) {
  Type type = ctx_.tensor(v.dtype, v.shape);
  Global *gp = m_.addGlobal(std::make_unique<Global>(symbolName(onnxName), type, nodeLoc()));
  if (v.bytes.size() > opts_.inlineLimit) {
    gp->setExternal(opts_.weightsRef, gp->name());
    externalData_[gp] = std::move(v);
  } else {
    gp->setLiteral(Attr::getDense(std::move(v)));
  }
  return gp;
}

const DenseValue *GraphImporter::known(Value *v) const {
  if (!v) return nullptr;
  if (const DenseValue *d = constantValue(v)) return d;
  if (auto *g = dyn_cast<Global>(v))
    if (auto it = externalData_.find(g); it != externalData_.end()) return &it->second;
  return nullptr;
}

Operation *GraphImporter::emit(OpCode code, const std::vector<Value *> &operands,
                               const std::vector<std::pair<std::string, Attr>> &attrs, int numResults,
                               std::string &error) {
  const OpInfo &info = opInfo(code);
  std::vector<Attr> all = defaultAttrs(code);
  for (auto &[name, a] : attrs) all[static_cast<size_t>(info.attrIndex(name))] = a;
  std::vector<Type> types(static_cast<size_t>(numResults >= 0 ? numResults : info.numResults), Type());
  auto op = Operation::create(code, nodeLoc(), operands, types, std::move(all));
  InferredTypes inf = inferResultTypes(*op, m_);
  if (!inf.ok() || inf.types.size() != op->numResults()) {
    error = "'" + std::string(info.mnemonic) + "' " + (inf.ok() ? "has the wrong number of results" : inf.error);
    op->dropAllReferences();
    return nullptr;
  }
  for (unsigned i = 0; i < op->numResults(); ++i) op->result(i)->setType(inf.types[i]);
  return block_->push_back(std::move(op));
}

Operation *GraphImporter::terminate(OpCode code, const std::vector<Value *> &operands, std::vector<Successor> succs) {
  auto op = Operation::create(code, nodeLoc(), operands, {}, defaultAttrs(code), std::move(succs));
  return block_->push_back(std::move(op));
}

Block *GraphImporter::newBlock(const std::string &label) {
  return fn_->addBlock(std::make_unique<Block>(label + std::to_string(blockCount_++)));
}

//===-- Graphs ---------------------------------------------------------------===//

bool GraphImporter::valueType(const onnx::ValueInfoProto &vi, Type &t, std::vector<std::string> &params,
                              std::string &error) {
  params.clear();
  if (!vi.type().has_tensor_type()) return sequenceType(vi.type(), vi.name(), t, error);
  const auto &tt = vi.type().tensor_type();
  std::optional<DType> dt = dtypeOf(tt.elem_type());
  if (!dt) {
    error = "'" + vi.name() + "' has element type " + onnxTypeName(tt.elem_type()) +
            ", which Nimble does not have (f32, f64, f16, bf16, bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64)";
    return false;
  }
  if (!tt.has_shape()) {
    error = "'" + vi.name() + "' has no shape: the importer needs the rank of every input";
    return false;
  }
  std::vector<int64_t> dims;
  params.clear();
  for (const auto &d : tt.shape().dim()) {
    dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : kDynamic);
    params.push_back(d.has_dim_param() ? d.dim_param() : "");
  }
  t = ctx_.tensor(*dt, dims);
  if (std::string why = checkTypeLimits(t); !why.empty()) {
    error = "'" + vi.name() + "': " + why;
    return false;
  }
  return true;
}

bool GraphImporter::addInitializers(const onnx::GraphProto &g, std::string &error) {
  for (const auto &t : g.initializer()) {
    DenseValue v;
    if (!readTensor(t, v, error)) return false;
    Type type = ctx_.tensor(v.dtype, v.shape);
    auto glob = std::make_unique<Global>(symbolName(t.name()), type, nodeLoc());
    uint64_t bytes = v.bytes.size();
    Global *gp = m_.addGlobal(std::move(glob));
    if (bytes > opts_.inlineLimit) {
      gp->setExternal(opts_.weightsRef, gp->name());
      externalData_[gp] = std::move(v);
    } else {
      gp->setLiteral(Attr::getDense(std::move(v)));
    }
    scopes_.back()[t.name()] = gp;
  }
  if (g.sparse_initializer_size()) {
    error = "sparse initializers are not supported ('" + g.sparse_initializer(0).values().name() + "')";
    return false;
  }
  return true;
}

bool GraphImporter::importNodes(const onnx::GraphProto &g, std::string &error) {
  for (const auto &node : g.node()) {
    ++nodeNumber_;
    // Exporters name most nodes; an unnamed one is called by its number.
    std::string who = node.name().empty() ? "#" + std::to_string(nodeNumber_) : "'" + node.name() + "'";
    std::string where = "node " + who + " (" + node.op_type() + ", opset " + std::to_string(opset_) + "): ";
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      error = "node " + who + " (" + node.domain() + "." + node.op_type() + "): the domain '" +
              node.domain() + "' is not supported (only ONNX's default domain is)";
      return false;
    }
    const OpEntry *e = findOp(node.op_type());
    if (!e) {
      const char *why = missingOpReason(node.op_type());
      error = where + (why ? why : "not an op of ONNX's default domain that the importer knows");
      return false;
    }
    if (opset_ < firstOpset(*e)) {
      error = where + "the op is handled from opset " + std::to_string(firstOpset(*e)) +
              " (onnx.version_converter can convert the model)";
      return false;
    }
    std::vector<Value *> in;
    for (const std::string &name : node.input()) {
      Value *v = nullptr;
      if (!name.empty() && !(v = lookup(name))) {
        error = where + "input '" + name + "' is not defined before the node";
        return false;
      }
      in.push_back(v);
    }
    // Sequences and optionals (ADTs) go only to the ops that take them; the
    // tensor converters read dtypes and dims of every input.
    const std::string &type = node.op_type();
    bool takesAdts = type == "Identity" || type == "Loop" || type.rfind("Sequence", 0) == 0 ||
                     type.rfind("Optional", 0) == 0;
    for (size_t k = 0; k < in.size() && !takesAdts; ++k)
      if (in[k] && !in[k]->type().isTensor()) {
        error = where + "input " + std::to_string(k) + " ('" + node.input(static_cast<int>(k)) + "') is " +
                in[k]->type().str() + ", not a tensor";
        return false;
      }
    Conv c(*this, node, opset_, std::move(in));
    std::vector<Value *> out;
    if (!e->convert(c, out)) {
      error = where + c.error();
      return false;
    }
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (static_cast<size_t>(i) >= out.size() || !out[static_cast<size_t>(i)]) {
        error = where + "output " + std::to_string(i) + " ('" + node.output(i) + "') is not supported";
        return false;
      }
      bind(node.output(i), out[static_cast<size_t>(i)]);
    }
  }
  return true;
}

bool GraphImporter::graphOutputs(const onnx::GraphProto &g, std::vector<Value *> &out, std::string &error) {
  for (const auto &o : g.output()) {
    Value *v = lookup(o.name());
    if (!v) {
      error = "graph output '" + o.name() + "' is not computed by the graph";
      return false;
    }
    out.push_back(v);
  }
  return true;
}

/// Inputs that share a dim_param are one size at run time: `dim`, `equal`,
/// and a branch to an `unreachable` located at the second input
/// ("model.onnx":0:<its input number>) when they differ. Nimble has no
/// assertion op with a message of its own; `unreachable` is the op whose
/// reaching is a located run-time error.
void GraphImporter::checkDimParams(const std::vector<std::tuple<std::string, Value *, int64_t, int>> &uses) {
  std::map<std::string, std::pair<Value *, int64_t>> first;
  for (const auto &[param, arg, axis, number] : uses) {
    auto [it, fresh] = first.emplace(param, std::make_pair(arg, axis));
    if (fresh) continue;
    std::string ignored;
    uint32_t saved = nodeNumber_;
    nodeNumber_ = 0;
    Value *a = emit(OpCode::Dim, {it->second.first}, {{"axis", Attr::getInt(it->second.second)}}, 1, ignored)->result();
    Value *b = emit(OpCode::Dim, {arg}, {{"axis", Attr::getInt(axis)}}, 1, ignored)->result();
    Value *eq = emit(OpCode::Equal, {a, b}, {}, 1, ignored)->result();
    eq->setName("same_" + valueName(param));
    Block *ok = newBlock(valueName(param) + "_ok"), *bad = newBlock(valueName(param) + "_differs");
    terminate(OpCode::CondBr, {eq}, {Successor{ok, 1, 0, "", {}}, Successor{bad, 1, 0, "", {}}});
    block_ = bad;
    Operation *u = terminate(OpCode::Unreachable, {}, {});
    u->setLoc({ctx_.intern(opts_.displayName), 0, static_cast<uint32_t>(number)});
    block_ = ok;
    nodeNumber_ = saved;
  }
}

bool GraphImporter::guard(Value *ok) {
  if (!ok) return false;
  Block *cont = newBlock("checked"), *bad = newBlock("check_failed");
  terminate(OpCode::CondBr, {ok}, {Successor{cont, 1, 0, "", {}}, Successor{bad, 1, 0, "", {}}});
  block_ = bad;
  terminate(OpCode::Unreachable, {}, {});
  block_ = cont;
  return true;
}

bool GraphImporter::importMain(const onnx::GraphProto &g, std::string &error) {
  scopes_.emplace_back();
  std::set<std::string> initNames;
  for (const auto &t : g.initializer()) initNames.insert(t.name());
  std::vector<Type> argTypes;
  std::vector<const onnx::ValueInfoProto *> inputs;
  std::vector<std::vector<std::string>> params;
  for (const auto &vi : g.input()) {
    // An input that is also an initializer (IR version 3 and earlier) is a
    // constant with a default: the importer takes the initializer.
    if (initNames.count(vi.name())) continue;
    Type t;
    params.emplace_back();
    if (!valueType(vi, t, params.back(), error)) {
      error = "input " + error;
      return false;
    }
    argTypes.push_back(t);
    inputs.push_back(&vi);
  }
  auto f = std::make_unique<Function>(opts_.functionName, ctx_.func(argTypes, {}), nodeLoc());
  fn_ = m_.addFunction(std::move(f));
  block_ = fn_->addBlock(std::make_unique<Block>("entry"));
  std::vector<std::tuple<std::string, Value *, int64_t, int>> uses;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value *a = block_->addArgument(argTypes[i], {ctx_.intern(opts_.displayName), 0, static_cast<uint32_t>(i + 1)});
    a->setName(valueName(inputs[i]->name()));
    scopes_.back()[inputs[i]->name()] = a;
    // A sequence input's declared element type is a default the graph may
    // correct (Sequences.cpp).
    if (isSeq(argTypes[i])) weakSeqs_[a] = inputs[i]->name();
    for (size_t d = 0; d < params[i].size(); ++d)
      if (!params[i][d].empty()) uses.emplace_back(params[i][d], a, static_cast<int64_t>(d), static_cast<int>(i + 1));
  }
  if (!addInitializers(g, error)) return false;
  checkDimParams(uses);
  if (!importNodes(g, error)) return false;
  std::vector<Value *> results;
  if (!graphOutputs(g, results, error)) return false;
  std::vector<Type> resultTypes;
  for (Value *v : results) resultTypes.push_back(v->type());
  fn_->setType(ctx_.func(argTypes, resultTypes));
  terminate(OpCode::Ret, results, {});
  return true;
}

/// Erases what no op uses: `constant`s made for folding, shape
/// computations that folding made dead, initializers that only fed folded
/// shapes (nimblec's dce would, but not at -O0, and the .nir reads better).
void GraphImporter::cleanUp() {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto &b : fn_->blocks()) {
      std::vector<Operation *> ops = b->opsSnapshot();
      for (auto it = ops.rbegin(); it != ops.rend(); ++it)
        if (opHasFlag((*it)->code(), opflags::Pure) && (*it)->numResults() && !(*it)->hasResultUses()) {
          if (*it == lastConstant_) lastConstant_ = nullptr;
          (*it)->erase();
          changed = true;
        }
    }
  }
  std::vector<Global *> dead;
  for (const auto &g : m_.globals())
    if (!g->hasUses()) dead.push_back(g.get());
  for (Global *g : dead) {
    externalData_.erase(g);
    m_.eraseGlobal(g);
  }
}

//===-- The model ------------------------------------------------------------===//

namespace {
/// Names in a model are arbitrary bytes: in a message, control characters
/// are escaped so that an error stays one line.
std::string oneLine(const std::string &s) {
  std::string r;
  for (unsigned char ch : s) {
    if (ch >= 0x20 && ch != 0x7f) {
      r += static_cast<char>(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
      r += buf;
    }
  }
  return r;
}

bool importModel(const std::string &bytes, const ImportOptions &opts, Context &ctx, ImportResult &result,
                 std::string &error);
} // namespace

bool importOnnxBytes(const std::string &bytes, const ImportOptions &opts, Context &ctx, ImportResult &result,
                     std::string &error) {
  bool ok = importModel(bytes, opts, ctx, result, error);
  if (!ok) error = oneLine(error);
  return ok;
}

namespace {
/// A bound on the imports a model may cost (Sequences.cpp's retries).
constexpr int kMaxSeqRetries = 64;

bool importModel(const std::string &bytes, const ImportOptions &opts, Context &ctx, ImportResult &result,
                 std::string &error) {
  onnx::ModelProto model;
  {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                                              static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
    in.SetTotalBytesLimit(INT_MAX);
    // Sub-graphs nest messages: the default of 100 levels allows If inside
    // If a few dozen deep, and no stack overflow.
    in.SetRecursionLimit(100);
    if (bytes.size() > INT_MAX || !model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
      error = "cannot parse the model: not an ONNX protobuf, or truncated or damaged";
      return false;
    }
  }
  if (!model.has_graph()) {
    error = "the model has no graph (not an ONNX model?)";
    return false;
  }
  int64_t opset = -1;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 0) {
    error = "the model imports no opset of ONNX's default domain";
    return false;
  }
  if (opset < kMinOpset || opset > kMaxOpset) {
    error = "opset " + std::to_string(opset) + " of the default domain is not supported (the importer reads opsets " +
            std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")";
    return false;
  }
  // A sequence whose element type was guessed and then learned (Sequences.cpp)
  // sends the import back to the start with what it learned, at most once
  // per such sequence; each try builds a module of its own.
  GraphImporter::SeqHints hints;
  std::unique_ptr<Module> m;
  std::unique_ptr<GraphImporter> gip;
  for (int tries = 0;; ++tries) {
    m = std::make_unique<Module>(ctx);
    gip = std::make_unique<GraphImporter>(*m, ctx, opts, static_cast<int>(opset), hints);
    error.clear();
    if (gip->importMain(model.graph(), error)) break;
    if (!gip->wantsRetry()) return false;
    if (tries == kMaxSeqRetries) {
      error = "the element types of more than " + std::to_string(kMaxSeqRetries) +
              " sequences had to be learned from their inserts (each one imports the model again): " + error;
      return false;
    }
  }
  GraphImporter &gi = *gip;
  recogniseIdioms(*m);
  gi.cleanUp();
  std::ostringstream diagText;
  DiagnosticEngine diag(nullptr, diagText);
  if (failed(verifyModule(*m, diag))) {
    std::string first = diagText.str();
    first = first.substr(0, first.find('\n'));
    error = "internal error: the imported module does not verify (a bug of the importer): " + first;
    return false;
  }
  result.weights.clear();
  for (const auto &g : m->globals())
    if (g->isExternal())
      if (DenseValue *d = gi.externalData(g.get())) // moved: weights can be GBs
        result.weights.push_back({g->key(), d->dtype, d->shape, std::move(d->bytes)});
  result.module = std::move(m);
  return true;
}
} // namespace

bool importOnnx(const ImportOptions &opts, Context &ctx, ImportResult &result, std::string &error) {
  std::string bytes;
  if (!readFile(opts.modelPath, bytes, error)) {
    error = oneLine(error);
    return false;
  }
  return importOnnxBytes(bytes, opts, ctx, result, error);
}

} // namespace nimble::onnx_import
