# The compile-fail twins, run by CTest:
#   cmake -DCOMMANDS=<compile_commands.json> -DSOURCE=<file> -DEXPECT_FAILURE=OFF -P run.cmake
#   cmake -DCOMMANDS=<compile_commands.json> -DSOURCE=<file> -DEXPECT_FAILURE=ON -P run.cmake
# Compiles SOURCE with the exact command CMake generated for it (-fsyntax-only: a static_assert
# fires during instantiation, no code is needed), without going through the build tool, so CTest
# may run these beside the other tests in one build directory.
#
# EXPECT_FAILURE=OFF: SOURCE (the generated unit of every .ok.cpp) must compile.
# EXPECT_FAILURE=ON: SOURCE is a generated unit of .ko.cpp twins, each included inside
# `namespace cf_<case>`. Every case must fail with the text its first line gives after
# "// expect: " (matched literally) in an error of its own: an error belongs to the case whose file
# (compile_fail/<case>.ko.cpp:) or namespace (cf_<case>::) the compiler named last, at or before the
# error line (the instantiation context that leads to an error names where it was required from).
# One compiler run then checks all its cases: a case that no longer fails has no error of its own,
# and another case's error, however worded, is not counted for it. A compiler reports an error in a
# template specialization once, for the first case that needs it, so cases that expect the same
# text go to different units (tests/CMakeLists.txt).
cmake_minimum_required(VERSION 3.20)

file(READ "${COMMANDS}" commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  if(file STREQUAL SOURCE)
    string(JSON command GET "${commands}" ${i} command)
    string(JSON directory GET "${commands}" ${i} directory)
    break()
  endif()
endforeach()
if(NOT DEFINED command)
  message(FATAL_ERROR "${SOURCE} is not in ${COMMANDS}")
endif()

separate_arguments(command UNIX_COMMAND "${command}")
# Drop the object output: only the diagnostics matter.
list(FIND command "-o" at)
if(at GREATER -1)
  list(REMOVE_AT command ${at})
  list(REMOVE_AT command ${at})
endif()
execute_process(COMMAND ${command} -fsyntax-only WORKING_DIRECTORY "${directory}"
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)

if(NOT EXPECT_FAILURE)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${SOURCE} must compile but failed (${status}):\n${output}")
  endif()
  return()
endif()

# CMake lists split at ';' and treat '[' ']' specially: both are spelled out before the output is
# split into lines, and in the expected texts alike.
function(plain_text out text)
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<bracket>" text "${text}")
  string(REPLACE "]" "</bracket>" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

file(READ "${SOURCE}" unit)
string(REGEX MATCHALL "#include \"[^\"]+\\.ko\\.cpp\"" kos "${unit}")
list(TRANSFORM kos REPLACE "#include \"([^\"]+)\"" "\\1")
if(NOT kos)
  message(FATAL_ERROR "${SOURCE} includes no .ko.cpp twin")
endif()
set(cases)
foreach(ko IN LISTS kos)
  get_filename_component(case "${ko}" NAME)
  string(REPLACE ".ko.cpp" "" case "${case}")
  # file(READ), not file(STRINGS): the latter would turn a ';' of the message into a list separator.
  file(READ "${ko}" source)
  if(NOT source MATCHES "^// expect: ([^\n]+)")
    message(FATAL_ERROR "${ko}: the first line must be '// expect: <text>'")
  endif()
  plain_text(expect_${case} "${CMAKE_MATCH_1}")
  list(APPEND cases ${case})
  set(errors_${case} "")
endforeach()

plain_text(text "${output}")
string(REPLACE "\n" ";" lines "${text}")
set(current "")
set(unattributed "")
foreach(line IN LISTS lines)
  foreach(case IN LISTS cases)
    string(FIND "${line}" "compile_fail/${case}.ko.cpp:" in_file)
    string(FIND "${line}" "cf_${case}::" in_namespace)
    if(in_file GREATER -1 OR in_namespace GREATER -1)
      set(current ${case})
    endif()
  endforeach()
  if(line MATCHES " error: ")
    if(current STREQUAL "")
      string(APPEND unattributed "${line}\n")
    else()
      string(APPEND errors_${current} "${line}\n")
    endif()
  endif()
endforeach()

set(failures "")
foreach(case IN LISTS cases)
  string(FIND "${errors_${case}}" "${expect_${case}}" found)
  if(errors_${case} STREQUAL "")
    string(APPEND failures "${case}: compiled, but it must fail with: ${expect_${case}}\n")
  elseif(found EQUAL -1)
    string(APPEND failures "${case}: failed, but without the expected text\n  ${expect_${case}}\n${errors_${case}}")
  else()
    message(STATUS "${case}: fails as expected")
  endif()
endforeach()
if(NOT unattributed STREQUAL "")
  string(APPEND failures "errors before any case:\n${unattributed}")
endif()
if(NOT failures STREQUAL "")
  message(FATAL_ERROR "${failures}\nThe whole compiler output:\n${output}")
endif()
