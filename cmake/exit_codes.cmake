# The exit codes of the contract are written once, in engine/core/error.hpp (enum class ExitCode);
# the public C header and the Python module get them from there, generated when CMake configures
# (and again whenever error.hpp changes: it is a configure dependency, so `cmake --build` re-runs
# this). scripts/check-exit-codes.py (ctest exit_codes_public) checks the results against
# error.hpp with a parser of its own.
#
#   <build>/include/commscript/commscript_exit_codes.h  included by include/commscript/commscript.h,
#                                                       installed beside it: CS_EXIT_<NAME> = N
#   <build>/python/commscript/_exit_codes.py            imported by python/commscript/__init__.py
#                                                       (the build's copy of the package):
#                                                       EXIT_CODES = {"name": N, ...}

# Reads error.hpp's ExitCode enumerators that have a number (an alias, `old = new`, is skipped):
# sets <out>_NAMES, <out>_VALUES and <out>_NOTES (the line's // comment) in the caller's scope.
function(cs_read_exit_codes error_hpp out)
  file(READ ${error_hpp} text)
  string(REGEX MATCH "enum class ExitCode : int {[^}]*}" block "${text}")
  if(NOT block)
    message(FATAL_ERROR "${error_hpp}: no `enum class ExitCode : int { ... }` to generate the exit codes from")
  endif()
  string(REPLACE "\n" ";" lines "${block}")
  set(names "")
  set(values "")
  set(notes "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^ *([a-z_]+) *= *([0-9]+),? *(// *(.*))?$")
      list(APPEND names ${CMAKE_MATCH_1})
      list(APPEND values ${CMAKE_MATCH_2})
      string(REPLACE ";" "," note "${CMAKE_MATCH_4}")
      string(REPLACE "*/" "* /" note "${note}")
      if(note STREQUAL "")
        set(note "-")  # a list keeps no empty item: the notes would shift
      endif()
      list(APPEND notes "${note}")
    endif()
  endforeach()
  set(${out}_NAMES "${names}" PARENT_SCOPE)
  set(${out}_VALUES "${values}" PARENT_SCOPE)
  set(${out}_NOTES "${notes}" PARENT_SCOPE)
endfunction()

function(cs_generate_exit_codes error_hpp c_header py_module)
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${error_hpp})
  cs_read_exit_codes(${error_hpp} EC)
  set(c_items "")
  set(py_items "")
  foreach(name value note IN ZIP_LISTS EC_NAMES EC_VALUES EC_NOTES)
    string(TOUPPER ${name} upper)
    if(note STREQUAL "-")
      set(note "")
    else()
      set(note " /* ${note} */")
    endif()
    list(APPEND c_items "  CS_EXIT_${upper} = ${value},${note}")  # a last comma is C99
    list(APPEND py_items "    \"${name}\": ${value},")
  endforeach()
  list(JOIN c_items "\n" c_body)
  list(JOIN py_items "\n" py_body)
  file(CONFIGURE OUTPUT ${c_header} @ONLY CONTENT
"/* Generated from engine/core/error.hpp by cmake/exit_codes.cmake: do not edit. */
#ifndef COMMSCRIPT_EXIT_CODES_H
#define COMMSCRIPT_EXIT_CODES_H
/* A run's exit code (the command line's, cs_result_exit_code's, cs_last_exit_code's): the
 * contract of docs/reference.md, \"Exit codes\". */
enum {
${c_body}
};
#endif
")
  file(CONFIGURE OUTPUT ${py_module} @ONLY CONTENT
"# Generated from engine/core/error.hpp by cmake/exit_codes.cmake: do not edit.
# A run's exit codes by name (docs/reference.md, \"Exit codes\").
EXIT_CODES = {
${py_body}
}
")
endfunction()
