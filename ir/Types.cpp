//===- Types.cpp - Uniqued IR types and sub-shaping -----------------------===//

#include "ir/Types.h"

#include "ir/Limits.h"

#include <algorithm>

namespace nimble::ir {

namespace {
std::string typeStr(const detail::TypeStorage *s) {
  switch (s->kind) {
  case TypeKind::Tensor: {
    std::string r = "tensor<";
    for (int64_t d : s->dims) r += (d == kDynamic ? "?" : std::to_string(d)) + "x";
    return r + std::string(dtypeName(s->dtype)) + ">";
  }
  case TypeKind::Tuple: {
    std::string r = "tuple<";
    for (size_t i = 0; i < s->elems.size(); ++i)
      r += (i ? ", " : "") + typeStr(s->elems[i]);
    return r + ">";
  }
  case TypeKind::Adt: return "@" + s->name;
  case TypeKind::Func: {
    std::string r = "(";
    for (size_t i = 0; i < s->elems.size(); ++i) r += (i ? ", " : "") + typeStr(s->elems[i]);
    r += ") -> ";
    if (s->results.size() == 1 && s->results[0]->kind != TypeKind::Func)
      return r + typeStr(s->results[0]);
    r += "(";
    for (size_t i = 0; i < s->results.size(); ++i)
      r += (i ? ", " : "") + typeStr(s->results[i]);
    return r + ")";
  }
  case TypeKind::Storage: return "storage";
  }
  return "<?>";
}

std::vector<Type> wrap(const std::vector<const detail::TypeStorage *> &v) {
  std::vector<Type> r;
  r.reserve(v.size());
  for (auto *s : v) r.emplace_back(s);
  return r;
}
} // namespace

bool Type::hasStaticShape() const {
  for (int64_t d : s_->dims)
    if (d == kDynamic) return false;
  return true;
}

std::vector<Type> Type::elems() const { return wrap(s_->elems); }
std::vector<Type> Type::results() const { return wrap(s_->results); }

bool Type::isSubtypeOf(Type super) const {
  if (*this == super) return true;
  if (!s_ || !super.s_ || kind() != super.kind()) return false;
  switch (kind()) {
  case TypeKind::Tensor:
    if (dtype() != super.dtype() || rank() != super.rank()) return false;
    for (size_t i = 0; i < dims().size(); ++i)
      if (!isSubDim(dims()[i], super.dims()[i])) return false;
    return true;
  case TypeKind::Tuple: {
    auto a = elems(), b = super.elems();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!a[i].isSubtypeOf(b[i])) return false;
    return true;
  }
  default: return false; // uniqued: equal handles only
  }
}

bool Type::isCompatibleWith(Type o) const {
  if (*this == o) return true;
  if (!s_ || !o.s_ || kind() != o.kind()) return false;
  switch (kind()) {
  case TypeKind::Tensor:
    if (dtype() != o.dtype() || rank() != o.rank()) return false;
    for (size_t i = 0; i < dims().size(); ++i)
      if (!dimsCompatible(dims()[i], o.dims()[i])) return false;
    return true;
  case TypeKind::Tuple: {
    auto a = elems(), b = o.elems();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!a[i].isCompatibleWith(b[i])) return false;
    return true;
  }
  default: return false;
  }
}

std::string Type::str() const { return s_ ? typeStr(s_) : "<<null type>>"; }

std::string checkTypeLimits(Type t) {
  if (!t) return {};
  if (t.depth() > limits::kMaxTypeDepth)
    return "type is nested more than " + std::to_string(limits::kMaxTypeDepth) +
           " levels deep (the limit)";
  switch (t.kind()) {
  case TypeKind::Tensor: {
    if (t.rank() > static_cast<int64_t>(limits::kMaxRank))
      return "tensor type has rank " + std::to_string(t.rank()) + ", more than the limit of " +
             std::to_string(limits::kMaxRank);
    int64_t n = 0, bytes = 0;
    if (!limits::checkedStaticElements(t.dims(), n) ||
        !limits::checkedMul(n, static_cast<int64_t>(dtypeSize(t.dtype())), bytes) ||
        bytes > limits::kMaxTensorBytes)
      return "tensor type " + t.str() + " holds more than " +
             std::to_string(limits::kMaxTensorBytes) + " bytes (2^48, the limit)";
    return {};
  }
  case TypeKind::Tuple:
  case TypeKind::Func:
    // Recursion bounded by the depth checked above.
    for (const auto *e : t.impl()->elems)
      if (std::string why = checkTypeLimits(Type(e)); !why.empty()) return why;
    for (const auto *e : t.impl()->results)
      if (std::string why = checkTypeLimits(Type(e)); !why.empty()) return why;
    return {};
  default: return {};
  }
}

Context::Context() = default;
Context::~Context() = default;

size_t Context::StructuralHash::operator()(const detail::TypeStorage *s) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(s->kind);
  auto mix = [&h](uint64_t v) {
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  };
  switch (s->kind) {
  case TypeKind::Tensor:
    mix(static_cast<uint64_t>(s->dtype));
    mix(s->dims.size());
    for (int64_t d : s->dims) mix(static_cast<uint64_t>(d));
    break;
  case TypeKind::Adt: mix(std::hash<std::string>()(s->name)); break;
  case TypeKind::Func:
    mix(s->results.size());
    for (const detail::TypeStorage *r : s->results) mix(reinterpret_cast<uintptr_t>(r));
    [[fallthrough]];
  case TypeKind::Tuple:
    mix(s->elems.size());
    for (const detail::TypeStorage *e : s->elems) mix(reinterpret_cast<uintptr_t>(e));
    break;
  case TypeKind::Storage: break;
  }
  return static_cast<size_t>(h);
}

bool Context::StructuralEq::operator()(const detail::TypeStorage *a, const detail::TypeStorage *b) const {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case TypeKind::Tensor: return a->dtype == b->dtype && a->dims == b->dims;
  case TypeKind::Adt: return a->name == b->name;
  case TypeKind::Func: return a->elems == b->elems && a->results == b->results;
  case TypeKind::Tuple: return a->elems == b->elems;
  case TypeKind::Storage: return true;
  }
  return false;
}

Type Context::unique(detail::TypeStorage s) {
  if (auto it = types_.find(&s); it != types_.end()) return Type(*it);
  owned_.push_back(std::make_unique<detail::TypeStorage>(std::move(s)));
  const detail::TypeStorage *t = owned_.back().get();
  types_.insert(t);
  return Type(t);
}

Type Context::tensor(DType dtype, std::vector<int64_t> dims) {
  detail::TypeStorage s;
  s.kind = TypeKind::Tensor;
  s.dtype = dtype;
  s.dims = std::move(dims);
  return unique(std::move(s));
}

Type Context::tuple(const std::vector<Type> &elems) {
  detail::TypeStorage s;
  s.kind = TypeKind::Tuple;
  for (Type t : elems) {
    s.elems.push_back(t.impl());
    s.depth = std::max(s.depth, t.depth() + 1);
  }
  return unique(std::move(s));
}

Type Context::adt(const std::string &name) {
  detail::TypeStorage s;
  s.kind = TypeKind::Adt;
  s.name = name;
  return unique(std::move(s));
}

Type Context::func(const std::vector<Type> &inputs, const std::vector<Type> &results) {
  detail::TypeStorage s;
  s.kind = TypeKind::Func;
  for (Type t : inputs) {
    s.elems.push_back(t.impl());
    s.depth = std::max(s.depth, t.depth() + 1);
  }
  for (Type t : results) {
    s.results.push_back(t.impl());
    s.depth = std::max(s.depth, t.depth() + 1);
  }
  return unique(std::move(s));
}

Type Context::storage() { detail::TypeStorage s;
  s.kind = TypeKind::Storage;
  return unique(std::move(s)); }

const char *Context::intern(std::string_view s) {
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second->c_str();
  auto owned = std::make_unique<std::string>(s);
  const char *p = owned->c_str();
  strings_.emplace(std::string(s), std::move(owned));
  return p;
}

} // namespace nimble::ir
