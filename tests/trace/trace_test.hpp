// Helpers shared by the tracer tests.
#pragma once

#include <golden.hpp>

#include <tracemod/core/tensor.hpp>

#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <string>

namespace trace_test {

#ifdef __FMA__
inline constexpr bool target_contracts = true;
#else
inline constexpr bool target_contracts = false;
#endif

// clang's -ffp-contract=fast (set by tracemod::native) fuses across statements, so once functors
// are inlined into a fused loop any multiply-add inside them (exp's polynomial, say) may contract
// differently than in the eager kernel; g++ contracts only within an expression.
#if defined(__clang__)
inline constexpr bool contracts_across_statements = true;
#else
inline constexpr bool contracts_across_statements = false;
#endif

/// Fused evaluation against eager mode: exact, except that a product feeding an addition may be
/// contracted into one FMA (a few ulps of the operands' magnitude apart) where the target has FMA.
inline void check_matches(const tracemod::Tensor& fused, const tracemod::Tensor& eager, bool may_contract,
                          const std::string& what) {
  const double tol = (may_contract || contracts_across_statements) && target_contracts ? 2e-6 : 0.0;
  golden::check_close(fused, eager, tol, tol, what);
}

/// The expected value of tmod::ops_of: a hana tuple of the op types.
template <class... Op>
constexpr auto ops = boost::hana::make_tuple(boost::hana::type_c<Op>...);

}  // namespace trace_test
