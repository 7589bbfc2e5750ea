// Tensor: a shape, a dtype and a shared, 64-byte aligned, contiguous row-major buffer.
//
// Copies are cheap and share the buffer (like torch.Tensor / megengine.Tensor handles); clone()
// makes an independent copy. reshape() returns a view on the same buffer.
#pragma once

#include <tracemod/core/checked.hpp>
#include <tracemod/core/dtype.hpp>
#include <tracemod/core/error.hpp>
#include <tracemod/core/qparams.hpp>
#include <tracemod/core/shape.hpp>
#include <tracemod/core/storage.hpp>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace tracemod {

class Tensor {
 public:
  /// An undefined tensor (no buffer); `defined()` is false.
  Tensor() = default;

  /// A tensor with uninitialised contents. A shape whose byte size overflows or exceeds
  /// max_tensor_bytes is a shape_error, and a failed allocation a tmod::error, both naming `op`.
  [[nodiscard]] static Tensor empty(const Shape& shape, DType dtype = DType::float32,
                                    std::string_view op = "Tensor.empty") {
    const std::int64_t bytes = byte_size(shape, dtype, op);
    Tensor t;
    try {
      t.storage_ = std::make_shared<Storage>(static_cast<std::size_t>(bytes));
    } catch (const std::bad_alloc&) {
      throw error(std::string(op) + ": out of memory allocating " + std::to_string(bytes) + " bytes for a " +
                  std::string(dtype_name(dtype)) + " tensor of shape " + shape.to_string());
    }
    t.shape_ = shape;
    t.dtype_ = dtype;
    return t;
  }

  /// Bytes of a tensor of `shape` and `dtype`, checked: shape_error naming `op` and the shape when the
  /// element count or the byte size overflows, or the size exceeds max_tensor_bytes.
  [[nodiscard]] static std::int64_t byte_size(const Shape& shape, DType dtype, std::string_view op) {
    const auto item = static_cast<std::int64_t>(itemsize(dtype));
    const std::int64_t n = shape.numel(op);
    if (n > max_tensor_bytes / item)
      throw shape_error(std::string(op) + ": a " + std::string(dtype_name(dtype)) + " tensor of shape " +
                        shape.to_string() + " (" + std::to_string(n) + " elements) exceeds the largest allocation, " +
                        std::to_string(max_tensor_bytes) + " bytes");
    return n * item;
  }

  /// A tensor over the first bytes of an existing buffer (the serializer's mapped weights); throws
  /// value_error if the buffer is smaller than the shape needs.
  [[nodiscard]] static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape,
                                           DType dtype = DType::float32) {
    const auto need = static_cast<std::size_t>(byte_size(shape, dtype, "Tensor.from_storage"));
    if (storage == nullptr || storage->bytes() < need)
      throw value_error("Tensor.from_storage: a buffer of " + std::to_string(storage ? storage->bytes() : 0) +
                        " bytes is too small for " + shape.to_string() + " " + std::string(dtype_name(dtype)));
    Tensor t;
    t.shape_ = shape;
    t.dtype_ = dtype;
    t.storage_ = std::move(storage);
    return t;
  }

  [[nodiscard]] bool defined() const noexcept { return storage_ != nullptr; }
  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] std::size_t ndim() const noexcept { return shape_.rank(); }
  /// Elements; 0 for an undefined tensor (its shape is the empty one, but it holds nothing).
  [[nodiscard]] std::int64_t numel() const noexcept { return defined() ? shape_.numel() : 0; }
  [[nodiscard]] std::size_t nbytes() const noexcept { return static_cast<std::size_t>(numel()) * itemsize(dtype_); }
  /// Extent of `axis`; negative axes count from the end.
  [[nodiscard]] std::int64_t size(std::int64_t axis) const {
    require_defined("Tensor.size");
    return shape_[normalize_axis(axis, ndim(), "Tensor.size")];
  }

  /// Mutable access; value_error if the buffer is read-only (make_read_only).
  template <class T>
  [[nodiscard]] T* data() {
    check_access<T>();
    if (storage_->read_only())
      throw value_error("Tensor.data: the " + std::string(dtype_name(dtype_)) + " tensor of shape " +
                        shape_.to_string() + " is read-only (a constant whose kernel keeps data derived from it); "
                        "write to a clone()");
    return reinterpret_cast<T*>(storage_->data());
  }
  template <class T>
  [[nodiscard]] const T* data() const {
    check_access<T>();
    return reinterpret_cast<const T*>(storage_->data());
  }
  template <class T>
  [[nodiscard]] std::span<T> values() {
    return {data<T>(), static_cast<std::size_t>(numel())};
  }
  template <class T>
  [[nodiscard]] std::span<const T> values() const {
    return {data<T>(), static_cast<std::size_t>(numel())};
  }

  /// The element at a multi-index (bounds-checked; for tests and small tensors, not for loops).
  template <class T = float>
  [[nodiscard]] T at(std::initializer_list<std::int64_t> index) const {
    require_defined("Tensor.at");
    if (index.size() != ndim())
      throw shape_error("Tensor.at: " + std::to_string(index.size()) + " indices for a tensor of shape " +
                        shape_.to_string());
    std::int64_t flat = 0;
    std::size_t axis = 0;
    for (std::int64_t i : index) {
      if (i < 0 || i >= shape_[axis])
        throw shape_error("Tensor.at: index " + std::to_string(i) + " out of range for axis " +
                          std::to_string(axis) + " of shape " + shape_.to_string());
      flat = flat * shape_[axis++] + i;
    }
    return data<T>()[flat];
  }

  /// The only element of a one-element tensor.
  template <class T = float>
  [[nodiscard]] T item() const {
    require_defined("Tensor.item");
    if (numel() != 1) throw shape_error("Tensor.item: tensor of shape " + shape_.to_string() + " is not one element");
    return data<T>()[0];
  }

  /// A deep copy (new buffer, same shape, dtype and qparams).
  [[nodiscard]] Tensor clone() const {
    require_defined("Tensor.clone");
    Tensor t = empty(shape_, dtype_, "Tensor.clone");
    std::memcpy(t.storage_->data(), storage_->data(), nbytes());
    t.qparams_ = qparams_;
    return t;
  }

  /// A view with another shape of the same number of elements (no copy).
  [[nodiscard]] Tensor reshape(const Shape& shape) const {
    require_defined("Tensor.reshape");
    if (shape.numel("Tensor.reshape") != numel())
      throw shape_error("Tensor.reshape: cannot reshape " + shape_.to_string() + " (" + std::to_string(numel()) +
                        " elements) into " + shape.to_string());
    Tensor t = *this;
    t.shape_ = shape;
    return t;
  }

  /// Makes the buffer read-only for every tensor that shares it, for good: mutable data() throws from
  /// then on, so data derived from its bytes (derived()) never goes stale. Reading is unaffected, and
  /// clone() returns a writable copy.
  void make_read_only() {
    require_defined("Tensor.make_read_only");
    storage_->make_read_only();
  }
  [[nodiscard]] bool read_only() const noexcept { return storage_ != nullptr && storage_->read_only(); }

  /// Data derived from a read-only tensor's bytes, made by make() once per key and kept with the
  /// buffer (Storage::derived); value_error for a writable tensor. The key names what make() computes
  /// and every parameter it depends on, the shape included (reshaped views share the buffer).
  template <class T, class Make>
  [[nodiscard]] std::shared_ptr<const T> derived(const derived_key& key, Make&& make) const {
    require_defined("Tensor.derived");
    return storage_->derived<T>(key, std::forward<Make>(make));
  }

  /// Identifies the buffer (equal for tensors that share it); null for an undefined tensor.
  [[nodiscard]] const void* storage_id() const noexcept { return storage_.get(); }
  [[nodiscard]] bool shares_storage_with(const Tensor& other) const noexcept {
    return storage_ != nullptr && storage_ == other.storage_;
  }

  [[nodiscard]] const std::optional<QParams>& qparams() const noexcept { return qparams_; }
  void set_qparams(std::optional<QParams> q) { qparams_ = std::move(q); }

 private:
  void require_defined(std::string_view op) const {
    if (!defined()) throw value_error(std::string(op) + ": the tensor is undefined (default-constructed)");
  }

  template <class T>
  void check_access() const {
    static_assert(is_element_type_v<T>, "Tensor::data<T>: T must be float, std::int32_t, bool, std::uint8_t or std::int8_t");
    require_defined("Tensor.data");
    if (dtype_of_v<T> != dtype_)
      throw dtype_error(std::string("Tensor.data: requested ") + std::string(dtype_name(dtype_of_v<T>)) +
                        " from a " + std::string(dtype_name(dtype_)) + " tensor of shape " + shape_.to_string());
  }

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::float32;
  std::optional<QParams> qparams_;
};

}  // namespace tracemod
