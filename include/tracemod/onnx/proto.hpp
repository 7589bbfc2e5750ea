// ONNX's protobuf classes (Debian's libonnx-dev) and the conversions tracemod needs around them:
// tensors to and from TensorProto, attribute access and construction, reading and writing model
// files. Only the optional tracemod::onnx component includes this header: the core never sees
// protobuf.
#pragma once

#include <tracemod/core/error.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/tensor.hpp>

// <sys/mman.h> (io/mapped_file.hpp) defines MAP_TYPE, which ONNX's parser.h declares as an enumerator.
#pragma push_macro("MAP_TYPE")
#undef MAP_TYPE
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#pragma pop_macro("MAP_TYPE")

#include <tracemod/io/mapped_file.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace tracemod::onnx {

namespace proto = ::onnx;

/// ONNX's name of an element type ("FLOAT", "INT64").
[[nodiscard]] inline std::string elem_type_name(std::int32_t t) {
  if (proto::TensorProto_DataType_IsValid(t))
    return proto::TensorProto_DataType_Name(static_cast<proto::TensorProto_DataType>(t));
  return "type " + std::to_string(t);
}

[[nodiscard]] inline std::int32_t elem_type_of(DType d) {
  return d == DType::int32 ? proto::TensorProto::INT32 : proto::TensorProto::FLOAT;
}

/// A TensorProto holding `t` (raw little-endian bytes, as PyTorch writes them).
inline void to_proto(const Tensor& t, const std::string& name, proto::TensorProto& out) {
  out.set_name(name);
  out.set_data_type(elem_type_of(t.dtype()));
  for (std::int64_t d : t.shape()) out.add_dims(d);
  const auto* bytes = t.dtype() == DType::int32 ? static_cast<const void*>(t.data<std::int32_t>())
                                                : static_cast<const void*>(t.data<float>());
  out.set_raw_data(std::string(static_cast<const char*>(bytes), t.nbytes()));  // tensors are contiguous
}

[[nodiscard]] inline Shape shape_of(const proto::TensorProto& t, std::string_view where) {
  if (static_cast<std::size_t>(t.dims_size()) > Shape::max_rank)
    throw format_error(std::string(where) + ": rank " + std::to_string(t.dims_size()) + " exceeds " +
                       std::to_string(Shape::max_rank));
  Shape s;
  for (std::int64_t d : t.dims()) {
    if (d < 0) throw format_error(std::string(where) + ": negative extent " + std::to_string(d));
    s.push_back(d);
  }
  (void)s.numel(where);  // throws on overflow
  return s;
}

namespace detail {

/// format_error unless a TensorProto holds the n elements its dims claim (checked before anything
/// of that size is allocated).
template <class T, class Field>
void check_count(const proto::TensorProto& t, const Field& field, std::size_t n, std::string_view where) {
  const std::size_t held = t.has_raw_data() ? t.raw_data().size() / sizeof(T) : static_cast<std::size_t>(field.size());
  if (held != n || (t.has_raw_data() && t.raw_data().size() % sizeof(T) != 0))
    throw format_error(std::string(where) + ": tensor '" + t.name() + "' holds " + std::to_string(held) +
                       " values, its dims need " + std::to_string(n));
}

/// Copies the (checked) elements of a TensorProto, from raw_data or the typed field, to `out` as T.
template <class T, class Field>
void copy_elements(const proto::TensorProto& t, const Field& field, std::size_t n, T* out) {
  if (t.has_raw_data()) {
    if (n != 0) std::memcpy(out, t.raw_data().data(), n * sizeof(T));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(field.Get(static_cast<int>(i)));
}

template <class T, class Field>
std::vector<T> elements(const proto::TensorProto& t, const Field& field, std::size_t n, std::string_view where) {
  check_count<T>(t, field, n, where);
  std::vector<T> v(n);
  copy_elements(t, field, n, v.data());
  return v;
}

}  // namespace detail

/// A float32 or int32 TensorProto as a tmod::Tensor; dtype_error for other element types, format_error
/// for malformed data (external data included: tracemod reads self-contained files only).
[[nodiscard]] inline Tensor from_proto(const proto::TensorProto& t, std::string_view where) {
  if (t.data_location() == proto::TensorProto::EXTERNAL)
    throw format_error(std::string(where) + ": tensor '" + t.name() + "' keeps its data in an external file");
  const Shape s = shape_of(t, where);
  const auto n = static_cast<std::size_t>(s.numel());
  if (t.data_type() == proto::TensorProto::FLOAT) {
    detail::check_count<float>(t, t.float_data(), n, where);
    Tensor out = Tensor::empty(s, DType::float32, where);
    detail::copy_elements(t, t.float_data(), n, out.data<float>());
    return out;
  }
  if (t.data_type() == proto::TensorProto::INT32) {
    detail::check_count<std::int32_t>(t, t.int32_data(), n, where);
    Tensor out = Tensor::empty(s, DType::int32, where);
    detail::copy_elements(t, t.int32_data(), n, out.data<std::int32_t>());
    return out;
  }
  throw dtype_error(std::string(where) + ": tensor '" + t.name() + "' has element type " + elem_type_name(t.data_type()) +
                    " (tracemod computes in float32)");
}

/// The values of an integer or float TensorProto as int64 (shapes, axes, bounds), for the few inputs
/// ONNX passes as tensors but tracemod takes as parameters.
[[nodiscard]] inline std::vector<double> numbers_of(const proto::TensorProto& t, std::string_view where) {
  const auto n = static_cast<std::size_t>(shape_of(t, where).numel());
  std::vector<double> out;
  const auto take = [&](const auto& v) { out.assign(v.begin(), v.end()); };
  switch (t.data_type()) {
    case proto::TensorProto::INT64: take(detail::elements<std::int64_t>(t, t.int64_data(), n, where)); break;
    case proto::TensorProto::INT32: take(detail::elements<std::int32_t>(t, t.int32_data(), n, where)); break;
    case proto::TensorProto::FLOAT: take(detail::elements<float>(t, t.float_data(), n, where)); break;
    case proto::TensorProto::DOUBLE: take(detail::elements<double>(t, t.double_data(), n, where)); break;
    default:
      throw dtype_error(std::string(where) + ": tensor '" + t.name() + "' has element type " +
                        elem_type_name(t.data_type()) + " where numbers are expected");
  }
  return out;
}

// ---- attributes ------------------------------------------------------------------------------------

[[nodiscard]] inline const proto::AttributeProto* find_attr(const proto::NodeProto& n, std::string_view name) {
  for (const proto::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
[[nodiscard]] inline std::int64_t attr_int(const proto::NodeProto& n, std::string_view name, std::int64_t fallback) {
  const proto::AttributeProto* a = find_attr(n, name);
  return a != nullptr ? a->i() : fallback;
}
[[nodiscard]] inline float attr_float(const proto::NodeProto& n, std::string_view name, float fallback) {
  const proto::AttributeProto* a = find_attr(n, name);
  return a != nullptr ? a->f() : fallback;
}
[[nodiscard]] inline std::string attr_string(const proto::NodeProto& n, std::string_view name, std::string fallback) {
  const proto::AttributeProto* a = find_attr(n, name);
  return a != nullptr ? a->s() : fallback;
}
[[nodiscard]] inline std::vector<std::int64_t> attr_ints(const proto::NodeProto& n, std::string_view name,
                                                         std::vector<std::int64_t> fallback = {}) {
  const proto::AttributeProto* a = find_attr(n, name);
  return a != nullptr ? std::vector<std::int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

inline void set_attr(proto::NodeProto& n, const std::string& name, std::int64_t v) {
  proto::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(proto::AttributeProto::INT);
  a->set_i(v);
}
inline void set_attr(proto::NodeProto& n, const std::string& name, double v) {
  proto::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(proto::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}
inline void set_attr(proto::NodeProto& n, const std::string& name, const std::vector<std::int64_t>& v) {
  proto::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(proto::AttributeProto::INTS);
  for (std::int64_t x : v) a->add_ints(x);
}

// ---- files -----------------------------------------------------------------------------------------

/// Parses a serialized protobuf message from a file; format_error naming the file otherwise. The file
/// is mapped (read in place, no copy of its bytes) and parsed with ParseFromArray; protobuf's parser
/// takes at most 2 GiB - 1, so a larger file is a format_error that says so.
template <class Message>
void read_proto(const std::filesystem::path& path, Message& m) {
  constexpr auto limit = static_cast<std::uintmax_t>(std::numeric_limits<int>::max());
  const auto too_large = [&](std::uintmax_t size) {
    return format_error("onnx: '" + path.string() + "' is " + std::to_string(size) + " bytes; protobuf parses at most " +
                        std::to_string(limit) +
                        " (models that large keep their weights in external data files, which tracemod does not read)");
  };
  std::error_code ec;  // checked before mapping, so that a huge file is never paged in
  if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > limit) throw too_large(size);
  const std::shared_ptr<io::MappedFile> file = io::MappedFile::open(path, "onnx", io::MappedFile::access::read_whole);
  if (file->size() > limit) throw too_large(file->size());  // grew in between
  if (!m.ParseFromArray(file->data(), static_cast<int>(file->size())))
    throw format_error("onnx: '" + path.string() + "' is no valid " + m.GetTypeName());
}

}  // namespace tracemod::onnx
