// Separate compilation of the library's heaviest definitions, opt-in. A header-only library makes
// every translation unit compile what it uses, and building the op, module and pass registries uses
// every kernel: a unit that records or loads a graph spends two to three times its parse time
// generating that code again. A program that defines TRACEMOD_EXTERN_TEMPLATES in every unit and
// includes <tracemod/instantiate.hpp> in exactly one .cpp compiles those definitions once, in that
// unit; the others only call them (docs/build.md, "Separate compilation"). Without the macro nothing
// changes.
#pragma once

#define TRACEMOD_EXTERN_TEMPLATE_INCLUDED  // tracemod/instantiate.hpp must come before it

/// Declares an explicit instantiation that <tracemod/instantiate.hpp> defines, when the program
/// compiles the library's heavy definitions separately (TRACEMOD_EXTERN_TEMPLATES).
#if defined(TRACEMOD_EXTERN_TEMPLATES)
#define TRACEMOD_EXTERN_TEMPLATE(...) extern template __VA_ARGS__;
#else
#define TRACEMOD_EXTERN_TEMPLATE(...)
#endif
