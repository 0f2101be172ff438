//===- Conv.cpp - The converters' helpers, element types -------------------===//

#include "frontend/onnx/Convert.h"
#include "frontend/onnx/Graph.h"

#include <charconv>
#include <cstdlib>

namespace nimble::onnx_import {

using namespace ir;

namespace {
int64_t rankOfValue(const Value *v) { return v->type().isTensor() ? v->type().rank() : -1; }
} // namespace

const onnx::AttributeProto *Conv::attr(const std::string &name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t Conv::attrInt(const std::string &name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

double Conv::attrFloat(const std::string &name, double dflt) const {
  const auto *a = attr(name);
  if (!a) return dflt;
  // ONNX keeps float attributes in 32 bits: the double nearest to the
  // shortest decimal that gives the same float (1e-05, not
  // 9.999999747378752e-06), which is what the exporter meant.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), a->f());
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

std::string Conv::attrStr(const std::string &name, const std::string &dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt;
}

std::optional<std::vector<int64_t>> Conv::attrInts(const std::string &name) const {
  const auto *a = attr(name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

bool Conv::tensorAttr(const onnx::TensorProto &t, DenseValue &v) {
  std::string why;
  return g_.readTensor(t, v, why) || fail(why);
}

Value *Conv::op(OpCode code, const std::vector<Value *> &operands,
                const std::vector<std::pair<std::string, Attr>> &attrs) {
  for (Value *v : operands)
    if (!v) {
      fail("an operand of '" + std::string(opInfo(code).mnemonic) + "' is missing");
      return nullptr;
    }
  std::string why;
  Operation *o = g_.emit(code, operands, attrs, -1, why);
  if (!o) {
    fail(why);
    return nullptr;
  }
  return o->result();
}

std::vector<Value *> Conv::ops(OpCode code, const std::vector<Value *> &operands,
                               const std::vector<std::pair<std::string, Attr>> &attrs, unsigned numResults) {
  std::string why;
  Operation *o = g_.emit(code, operands, attrs, static_cast<int>(numResults), why);
  if (!o) {
    fail(why);
    return {};
  }
  return o->results();
}

Value *Conv::constant(DenseValue v) { return g_.constant(std::move(v)); }

Value *Conv::scalar(DType t, double v) {
  DenseValue d;
  d.dtype = t;
  d.appendDouble(v); // to an integer type saturating (an infinite threshold, say)
  return constant(std::move(d));
}

Value *Conv::i64s(const std::vector<int64_t> &v) {
  DenseValue d;
  d.dtype = DType::I64;
  d.shape = {static_cast<int64_t>(v.size())};
  for (int64_t x : v) d.appendInt(x);
  return constant(std::move(d));
}

const DenseValue *Conv::known(Value *v) const { return g_.known(v); }

std::optional<std::vector<int64_t>> Conv::knownInts(size_t i) const {
  const DenseValue *d = known(input(i));
  if (!d || !isInteger(d->dtype)) return std::nullopt;
  std::vector<int64_t> r;
  for (int64_t k = 0, n = d->numElements(); k < n; ++k) r.push_back(d->getInt(k));
  return r;
}

Conv::DimPart Conv::dimOf(Value *x, int64_t axis) {
  int64_t d = x->type().dims()[static_cast<size_t>(axis)];
  if (d != kDynamic) return {d, nullptr};
  return {0, op(OpCode::Dim, {x}, {{"axis", Attr::getInt(axis)}})};
}

std::optional<std::vector<Conv::DimPart>> Conv::parts(Value *v) const {
  if (!v || rankOfValue(v) != 1 || !isInteger(v->type().dtype())) return std::nullopt;
  if (const DenseValue *d = known(v); d && d->numElements() <= 64) {
    std::vector<DimPart> r;
    for (int64_t k = 0, n = d->numElements(); k < n; ++k) r.push_back({d->getInt(k), nullptr});
    return r;
  }
  auto it = g_.partsMap().find(v);
  if (it == g_.partsMap().end()) return std::nullopt;
  std::vector<DimPart> r;
  for (const auto &[size, value] : it->second) r.push_back({size, value});
  return r;
}

void Conv::setParts(Value *v, std::vector<DimPart> p) {
  if (!v) return;
  auto &e = g_.partsMap()[v];
  e.clear();
  for (const DimPart &d : p) e.emplace_back(d.size, d.v);
}

std::optional<Conv::DimPart> Conv::scalarPart(Value *v) const {
  if (!v || rankOfValue(v) != 0 || v->type().dtype() != DType::I64) return std::nullopt;
  if (const DenseValue *d = known(v)) return DimPart{d->getInt(0), nullptr};
  return DimPart{0, v};
}

Value *Conv::shapeVector(const std::vector<DimPart> &parts) {
  bool allStatic = true;
  for (const DimPart &p : parts) allStatic &= p.v == nullptr;
  if (allStatic) {
    std::vector<int64_t> s;
    for (const DimPart &p : parts) s.push_back(p.size);
    return i64s(s);
  }
  std::vector<Value *> pieces;
  for (const DimPart &p : parts) {
    Value *e = p.v ? op(OpCode::ExpandDims, {p.v}, {{"axis", Attr::getInt(0)}}) : i64s({p.size});
    if (!e) return nullptr;
    pieces.push_back(e);
  }
  return op(OpCode::Concat, pieces);
}

bool Conv::fail(std::string why) {
  if (error_.empty()) error_ = std::move(why);
  return false;
}

Context &Conv::ctx() const { return g_.ctx(); }

std::optional<DType> dtypeOf(int t) {
  switch (t) {
  case onnx::TensorProto_DataType_FLOAT: return DType::F32;
  case onnx::TensorProto_DataType_DOUBLE: return DType::F64;
  case onnx::TensorProto_DataType_FLOAT16: return DType::F16;
  case onnx::TensorProto_DataType_BFLOAT16: return DType::BF16;
  case onnx::TensorProto_DataType_BOOL: return DType::I1;
  case onnx::TensorProto_DataType_INT8: return DType::I8;
  case onnx::TensorProto_DataType_INT32: return DType::I32;
  case onnx::TensorProto_DataType_INT64: return DType::I64;
  case onnx::TensorProto_DataType_INT16: return DType::I16;
  case onnx::TensorProto_DataType_UINT8: return DType::U8;
  case onnx::TensorProto_DataType_UINT16: return DType::U16;
  case onnx::TensorProto_DataType_UINT32: return DType::U32;
  case onnx::TensorProto_DataType_UINT64: return DType::U64;
  default: return std::nullopt;
  }
}

std::string onnxTypeName(int t) {
  static const char *names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                "float8e5m2fnuz", "uint4", "int4"};
  if (t >= 0 && t < static_cast<int>(sizeof(names) / sizeof(names[0]))) return names[t];
  return "#" + std::to_string(t);
}

} // namespace nimble::onnx_import
