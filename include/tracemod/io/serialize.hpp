// Saving and loading traced modules (docs/serialization.md): tmod::save and tmod::load.
#pragma once

#include <tracemod/io/load.hpp>
#include <tracemod/io/save.hpp>
