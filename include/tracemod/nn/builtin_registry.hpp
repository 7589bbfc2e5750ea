// The registry of builtin modules with every builtin module of the library registered: what the
// serializer includes, so that a loading program rebuilds any of them by type name without naming
// their classes. Each module registers itself through TM_BUILTIN_MODULE (nn/builtin_registration.hpp).
#pragma once

#include <tracemod/nn.hpp>
#include <tracemod/nn/builtin_registration.hpp>
