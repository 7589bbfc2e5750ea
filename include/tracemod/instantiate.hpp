// The library's heaviest definitions, compiled here: include this header in exactly one .cpp of a
// program whose translation units all define TRACEMOD_EXTERN_TEMPLATES (core/extern_template.hpp;
// docs/build.md, "Separate compilation"), before any other tracemod header. That unit then holds the
// code of the op, module and pass registries; the other units declare it and call it.
#pragma once

#if defined(TRACEMOD_EXTERN_TEMPLATE_INCLUDED)
#error "tracemod/instantiate.hpp must come before every other tracemod header of its translation unit"
#endif
#define TRACEMOD_INSTANTIATE_TEMPLATES

#include <tracemod/tracemod.hpp>

#include <vector>

template std::vector<tracemod::Pass> tracemod::passes::builtin_passes<void>();
