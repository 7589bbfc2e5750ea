# One compile-fail twin, run by CTest: cmake -DCOMMANDS=<compile_commands.json> -DSOURCE=<file>
#   -DEXPECT_FAILURE=<ON|OFF> -P run.cmake
# Compiles SOURCE with the exact command CMake generated for it (-fsyntax-only: a static_assert
# fires during instantiation, no code is needed), without going through the build tool, so CTest
# may run any number of these at once in one build directory. An .ok.cpp must compile; a .ko.cpp
# must fail (non-zero exit code) and print the text its first line gives after "// expect: ",
# matched literally.
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

# file(READ), not file(STRINGS): the latter would turn a ';' of the message into a list separator.
file(READ "${SOURCE}" source)
if(NOT source MATCHES "^// expect: ([^\n]+)")
  message(FATAL_ERROR "${SOURCE}: the first line must be '// expect: <text>'")
endif()
set(expect "${CMAKE_MATCH_1}")
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail with: ${expect}")
endif()
string(FIND "${output}" "${expect}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "${SOURCE} failed to compile, but without the expected text\n  ${expect}\n${output}")
endif()
message(STATUS "${SOURCE}: fails as expected")
