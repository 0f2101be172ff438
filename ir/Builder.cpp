//===- Builder.cpp - Creating operations at an insertion point ------------===//

#include "ir/Builder.h"

#include "ir/Inference.h"

namespace nimble::ir {

Operation *Builder::create(OpCode code, const std::vector<Value *> &operands,
                           const std::vector<std::pair<std::string, Attr>> &attrs,
                           std::vector<Type> types, std::vector<Successor> succs) {
  const OpInfo &info = opInfo(code);
  std::vector<Attr> all = defaultAttrs(code);
  for (auto &[name, a] : attrs) {
    int i = info.attrIndex(name);
    assert(i >= 0 && "unknown attribute for this op");
    all[static_cast<size_t>(i)] = a;
  }
  bool infer = types.empty() && info.numResults != 0;
  if (infer && info.numResults > 0) types.assign(static_cast<size_t>(info.numResults), Type());
  auto op = Operation::create(code, loc_, operands, types, std::move(all), std::move(succs));
  if (infer) {
    InferredTypes inf = inferResultTypes(*op, m_);
    if (!inf.ok() || inf.types.size() != op->numResults()) {
      // Detach the uses the new op made before it is destroyed.
      op->dropAllReferences();
      return nullptr;
    }
    for (unsigned i = 0; i < op->numResults(); ++i) op->result(i)->setType(inf.types[i]);
  }
  assert(block_ && "no insertion point");
  return block_->insertBefore(before_, std::move(op));
}

Value *Builder::constantI64(int64_t v) {
  DenseValue d;
  d.dtype = DType::I64;
  d.appendInt(v);
  return create(OpCode::Constant, {}, {{"value", Attr::getDense(std::move(d))}},
                {context().tensor(DType::I64, {})})
      ->result();
}

Value *Builder::splat(Type t, double v) {
  DenseValue d;
  d.dtype = t.dtype();
  d.shape = t.dims();
  d.splat = t.rank() > 0;
  if (isFloat(t.dtype())) d.appendDouble(v);
  else d.appendInt(static_cast<int64_t>(v));
  return create(OpCode::Constant, {}, {{"value", Attr::getDense(std::move(d))}}, {t})->result();
}

} // namespace nimble::ir
