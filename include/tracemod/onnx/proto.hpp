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
#include <onnx/common/version.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#pragma pop_macro("MAP_TYPE")

#include <tracemod/io/mapped_file.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
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
  switch (d) {
    case DType::int32: return proto::TensorProto::INT32;
    case DType::boolean: return proto::TensorProto::BOOL;
    case DType::uint8: return proto::TensorProto::UINT8;
    case DType::int8: return proto::TensorProto::INT8;
    case DType::float32: break;
  }
  return proto::TensorProto::FLOAT;
}

/// The DType of an ONNX element type tracemod holds (FLOAT, INT32, BOOL), or nullopt.
[[nodiscard]] inline std::optional<DType> dtype_of_elem_type(std::int32_t t) {
  if (t == proto::TensorProto::FLOAT) return DType::float32;
  if (t == proto::TensorProto::INT32) return DType::int32;
  if (t == proto::TensorProto::BOOL) return DType::boolean;
  return std::nullopt;
}

/// A TensorProto holding `t` (raw little-endian bytes, as PyTorch writes them).
inline void to_proto(const Tensor& t, const std::string& name, proto::TensorProto& out) {
  out.set_name(name);
  out.set_data_type(elem_type_of(t.dtype()));
  for (std::int64_t d : t.shape()) out.add_dims(d);
  const void* bytes = visit_dtype(t.dtype(), [&]<class T>(T) { return static_cast<const void*>(t.data<T>()); });
  out.set_raw_data(std::string(static_cast<const char*>(bytes), t.nbytes()));  // tensors are contiguous
}

[[nodiscard]] inline Shape shape_of(const proto::TensorProto& t, std::string_view where) {
  const std::string what = std::string(where) + ": tensor '" + t.name() + "'";
  if (static_cast<std::size_t>(t.dims_size()) > Shape::max_rank)
    throw format_error(what + " has rank " + std::to_string(t.dims_size()) + ", more than " + std::to_string(Shape::max_rank));
  Shape s;
  for (std::int64_t d : t.dims()) {
    if (d < 0) throw format_error(what + " has the negative extent " + std::to_string(d));
    s.push_back(d);
  }
  try {
    (void)s.numel(what);
  } catch (const shape_error& e) {
    throw format_error(e.what());
  }
  return s;
}

namespace detail {

/// Bytes of one element of an ONNX element type in raw_data; 0 for STRING and invalid types.
[[nodiscard]] inline std::size_t element_bytes(std::int32_t type) {
  switch (type) {
    case proto::TensorProto::UINT8: case proto::TensorProto::INT8: case proto::TensorProto::BOOL: return 1;
    case proto::TensorProto::UINT16: case proto::TensorProto::INT16: case proto::TensorProto::FLOAT16:
    case proto::TensorProto::BFLOAT16: return 2;
    case proto::TensorProto::FLOAT: case proto::TensorProto::INT32: case proto::TensorProto::UINT32: return 4;
    case proto::TensorProto::INT64: case proto::TensorProto::UINT64: case proto::TensorProto::DOUBLE:
    case proto::TensorProto::COMPLEX64: return 8;
    case proto::TensorProto::COMPLEX128: return 16;
    default: return 0;
  }
}

/// The typed field that holds the elements of `t` when it has no raw_data: its name, its size, and
/// how many of its values make one element (2 for complex numbers).
struct typed_field {
  const char* name;
  std::size_t size;
  std::size_t per_element;
};
[[nodiscard]] inline typed_field field_of(const proto::TensorProto& t) {
  const auto n = [](const auto& f) { return static_cast<std::size_t>(f.size()); };
  switch (t.data_type()) {
    case proto::TensorProto::FLOAT: return {"float_data", n(t.float_data()), 1};
    case proto::TensorProto::COMPLEX64: return {"float_data", n(t.float_data()), 2};
    case proto::TensorProto::DOUBLE: return {"double_data", n(t.double_data()), 1};
    case proto::TensorProto::COMPLEX128: return {"double_data", n(t.double_data()), 2};
    case proto::TensorProto::INT64: return {"int64_data", n(t.int64_data()), 1};
    case proto::TensorProto::UINT32: case proto::TensorProto::UINT64: return {"uint64_data", n(t.uint64_data()), 1};
    case proto::TensorProto::STRING: return {"string_data", n(t.string_data()), 1};
    default: return {"int32_data", n(t.int32_data()), 1};  // the narrower integers, bool and 16-bit floats
  }
}

}  // namespace detail

/// format_error naming `where` and the tensor unless `t` is well formed: a valid element type, dims
/// that fit a tensor, and raw_data (in bytes) or its typed field (in values) exactly as large as the
/// dims need. Checked before anything of that size is allocated; external data is not checked here.
inline void check_tensor(const proto::TensorProto& t, std::string_view where) {
  const std::string what = std::string(where) + ": tensor '" + t.name() + "'";
  if (t.data_type() == proto::TensorProto::UNDEFINED || !proto::TensorProto_DataType_IsValid(t.data_type()))
    throw format_error(what + " has no valid element type (" + elem_type_name(t.data_type()) + ")");
  const Shape s = shape_of(t, where);
  if (t.data_location() == proto::TensorProto::EXTERNAL) return;
  const auto n = static_cast<std::uint64_t>(s.numel());
  const std::string type = elem_type_name(t.data_type());
  if (t.has_raw_data()) {
    const std::size_t item = detail::element_bytes(t.data_type());
    if (item == 0) throw format_error(what + " of element type " + type + " has raw_data, which ONNX allows for fixed-size types only");
    if (t.raw_data().size() % item != 0 || t.raw_data().size() / item != n)
      throw format_error(what + " holds " + std::to_string(t.raw_data().size()) + " bytes of raw_data; its dims " +
                         s.to_string() + " need " + std::to_string(n) + " " + type + " elements of " +
                         std::to_string(item) + " bytes");
    return;
  }
  const detail::typed_field f = detail::field_of(t);
  if (f.size != n * f.per_element)
    throw format_error(what + " holds " + std::to_string(f.size) + " values in " + f.name + "; its dims " + s.to_string() +
                       " need " + std::to_string(n * f.per_element) + (f.per_element == 1 ? "" : " (two per " + type + " element)"));
}

namespace detail {

/// format_error for a tensor whose data is in an external file: tracemod reads self-contained files only.
inline void require_embedded(const proto::TensorProto& t, std::string_view where) {
  if (t.data_location() == proto::TensorProto::EXTERNAL)
    throw format_error(std::string(where) + ": tensor '" + t.name() + "' keeps its data in an external file");
}

/// Copies the elements of a checked TensorProto, from raw_data or the typed field, to `out` as T.
template <class T, class Field>
void copy_elements(const proto::TensorProto& t, const Field& field, std::size_t n, T* out) {
  if (t.has_raw_data()) {
    if (n != 0) std::memcpy(out, t.raw_data().data(), n * sizeof(T));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(field.Get(static_cast<int>(i)));
}

template <class T, class Field>
std::vector<T> elements(const proto::TensorProto& t, const Field& field, std::size_t n) {
  std::vector<T> v(n);
  copy_elements(t, field, n, v.data());
  return v;
}

}  // namespace detail

/// A float32, int32 or bool TensorProto as a tmod::Tensor; dtype_error for other element types, format_error
/// for malformed data (external data included: tracemod reads self-contained files only).
[[nodiscard]] inline Tensor from_proto(const proto::TensorProto& t, std::string_view where) {
  detail::require_embedded(t, where);
  check_tensor(t, where);
  const Shape s = shape_of(t, where);
  const auto n = static_cast<std::size_t>(s.numel());
  if (t.data_type() == proto::TensorProto::FLOAT) {
    Tensor out = Tensor::empty(s, DType::float32, where);
    detail::copy_elements(t, t.float_data(), n, out.data<float>());
    return out;
  }
  if (t.data_type() == proto::TensorProto::INT32) {
    Tensor out = Tensor::empty(s, DType::int32, where);
    detail::copy_elements(t, t.int32_data(), n, out.data<std::int32_t>());
    return out;
  }
  if (t.data_type() == proto::TensorProto::BOOL) {
    const std::vector<std::uint8_t> v = detail::elements<std::uint8_t>(t, t.int32_data(), n);
    Tensor out = Tensor::empty(s, DType::boolean, where);
    bool* o = out.data<bool>();
    for (std::size_t i = 0; i < n; ++i) o[i] = v[i] != 0;
    return out;
  }
  throw dtype_error(std::string(where) + ": tensor '" + t.name() + "' has element type " + elem_type_name(t.data_type()) +
                    " (tracemod holds float32, int32 and bool tensors)");
}

/// The values of an integer, bool or float TensorProto as doubles (shapes, axes, bounds), for the few inputs
/// ONNX passes as tensors but tracemod takes as parameters.
[[nodiscard]] inline std::vector<double> numbers_of(const proto::TensorProto& t, std::string_view where) {
  detail::require_embedded(t, where);
  check_tensor(t, where);
  const auto n = static_cast<std::size_t>(shape_of(t, where).numel());
  std::vector<double> out;
  const auto take = [&](const auto& v) { out.assign(v.begin(), v.end()); };
  switch (t.data_type()) {
    case proto::TensorProto::INT64: take(detail::elements<std::int64_t>(t, t.int64_data(), n)); break;
    case proto::TensorProto::INT32: take(detail::elements<std::int32_t>(t, t.int32_data(), n)); break;
    case proto::TensorProto::BOOL: take(detail::elements<std::uint8_t>(t, t.int32_data(), n)); break;
    case proto::TensorProto::FLOAT: take(detail::elements<float>(t, t.float_data(), n)); break;
    case proto::TensorProto::DOUBLE: take(detail::elements<double>(t, t.double_data(), n)); break;
    default:
      throw dtype_error(std::string(where) + ": tensor '" + t.name() + "' has element type " +
                        elem_type_name(t.data_type()) + " where numbers are expected");
  }
  return out;
}

/// The values of an INT64 or INT32 TensorProto (shapes, axes), exactly as written; format_error for
/// other element types (ONNX defines these inputs as INT64).
[[nodiscard]] inline std::vector<std::int64_t> integers_of(const proto::TensorProto& t, std::string_view where) {
  detail::require_embedded(t, where);
  check_tensor(t, where);
  const auto n = static_cast<std::size_t>(shape_of(t, where).numel());
  if (t.data_type() == proto::TensorProto::INT64) return detail::elements<std::int64_t>(t, t.int64_data(), n);
  if (t.data_type() == proto::TensorProto::INT32) {
    const std::vector<std::int32_t> v = detail::elements<std::int32_t>(t, t.int32_data(), n);
    return {v.begin(), v.end()};
  }
  throw format_error(std::string(where) + ": tensor '" + t.name() + "' has element type " + elem_type_name(t.data_type()) +
                     ", where ONNX defines INT64");
}

// ---- attributes ------------------------------------------------------------------------------------

[[nodiscard]] inline const proto::AttributeProto* find_attr(const proto::NodeProto& n, std::string_view name) {
  for (const proto::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
/// Attribute `name` of `n` if it has type `type`, nullptr if absent; format_error if it has another
/// type (models of IR version 1 leave the type unset: that is accepted).
[[nodiscard]] inline const proto::AttributeProto* typed_attr(const proto::NodeProto& n, std::string_view name,
                                                             proto::AttributeProto::AttributeType type) {
  const proto::AttributeProto* a = find_attr(n, name);
  if (a == nullptr || a->type() == type || a->type() == proto::AttributeProto::UNDEFINED) return a;
  const auto type_name = [](int t) {
    return proto::AttributeProto_AttributeType_IsValid(t)
               ? proto::AttributeProto_AttributeType_Name(static_cast<proto::AttributeProto::AttributeType>(t))
               : "type " + std::to_string(t);
  };
  throw format_error("attribute '" + std::string(name) + "' has type " + type_name(a->type()) + ", where ONNX defines " +
                     type_name(type));
}
[[nodiscard]] inline std::int64_t attr_int(const proto::NodeProto& n, std::string_view name, std::int64_t fallback) {
  const proto::AttributeProto* a = typed_attr(n, name, proto::AttributeProto::INT);
  return a != nullptr ? a->i() : fallback;
}
[[nodiscard]] inline float attr_float(const proto::NodeProto& n, std::string_view name, float fallback) {
  const proto::AttributeProto* a = typed_attr(n, name, proto::AttributeProto::FLOAT);
  return a != nullptr ? a->f() : fallback;
}
[[nodiscard]] inline std::string attr_string(const proto::NodeProto& n, std::string_view name, std::string fallback) {
  const proto::AttributeProto* a = typed_attr(n, name, proto::AttributeProto::STRING);
  return a != nullptr ? a->s() : fallback;
}
[[nodiscard]] inline std::vector<std::int64_t> attr_ints(const proto::NodeProto& n, std::string_view name,
                                                         std::vector<std::int64_t> fallback = {}) {
  const proto::AttributeProto* a = typed_attr(n, name, proto::AttributeProto::INTS);
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
inline void set_attr(proto::NodeProto& n, const std::string& name, const std::string& v) {
  proto::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(proto::AttributeProto::STRING);
  a->set_s(v);
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
  if (file->size() == 0)  // protobuf parses no bytes as a message with every field unset
    throw format_error("onnx: '" + path.string() + "' is empty (0 bytes), no " + m.GetTypeName());
  if (!m.ParseFromArray(file->data(), static_cast<int>(file->size())))
    throw format_error("onnx: '" + path.string() + "' is no valid " + m.GetTypeName());
}

}  // namespace tracemod::onnx
