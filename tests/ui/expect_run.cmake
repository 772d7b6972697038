# Runs a command and checks how it ended: exit code, what it printed, how many lines went to
# stderr, and a file it must not have written. (ctest's PASS_REGULAR_EXPRESSION ignores the exit
# code, and these tests need both.)
#
#   cmake [-DEXPECT_EXIT=N] [-DSTDOUT_REGEX=RE] [-DSTDERR_REGEX=RE] [-DSTDERR_HAS=TEXT]
#         [-DSTDERR_LINES=N] [-DNO_FILE=PATH] [-DNO_DISPLAY=1] [-DREPLAY_UNLESS_GPU=1]
#         -P expect_run.cmake -- COMMAND [ARGS...]
#
# NO_DISPLAY: run with DISPLAY and WAYLAND_DISPLAY unset, so any attempt to open a window fails
# with its own message. REPLAY_UNLESS_GPU: a missing STDOUT_REGEX or STDERR_REGEX match is accepted when this
# machine has an NVIDIA GPU (nvidia-smi lists one), where the window rightly measures live.
set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "expect_run.cmake: no command after --")
endif()
if(NO_DISPLAY)
  list(PREPEND command ${CMAKE_COMMAND} -E env --unset=DISPLAY --unset=WAYLAND_DISPLAY)
endif()
if(NO_FILE)
  file(REMOVE "${NO_FILE}")
endif()

# xvfb-run itself sometimes fails after the command has ended, when that came within a fraction
# of a second of the server's start (seen in CI: "xvfb-run: error: problem while cleaning up
# temporary directory", exit 5, on the tests whose window refuses to open): that is not the app's
# answer, so such a run is repeated, up to 3 times.
foreach(attempt RANGE 1 3)
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 220)
  message("exit: ${rc}\n--- stdout ---\n${out}--- stderr ---\n${err}--------------")
  if(NOT err MATCHES "xvfb-run: error: problem while cleaning up temporary directory\n?$")
    break()
  endif()
  message("xvfb-run failed to clean up after the command (its own failure): running it again")
endforeach()

set(failures "")
if(DEFINED EXPECT_EXIT AND NOT "${rc}" STREQUAL "${EXPECT_EXIT}")
  # A crash shows here as e.g. "Segmentation fault" or "Child aborted", never as 1.
  string(APPEND failures "exit was '${rc}', expected ${EXPECT_EXIT}\n")
endif()
set(has_gpu FALSE)
if(REPLAY_UNLESS_GPU)
  execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE smi_rc OUTPUT_VARIABLE smi_out
                  ERROR_QUIET)
  if("${smi_rc}" STREQUAL "0" AND smi_out MATCHES "GPU 0")
    set(has_gpu TRUE)
  endif()
endif()
foreach(stream stdout stderr)
  string(TOUPPER ${stream} upper)
  set(text "${out}")
  if(stream STREQUAL "stderr")
    set(text "${err}")
  endif()
  if(DEFINED ${upper}_REGEX AND NOT text MATCHES "${${upper}_REGEX}")
    if(has_gpu)
      message("${stream} does not match '${${upper}_REGEX}', but this machine has a GPU: live is right")
    else()
      string(APPEND failures "${stream} does not match '${${upper}_REGEX}'\n")
    endif()
  endif()
endforeach()
if(DEFINED STDERR_HAS)
  string(FIND "${err}" "${STDERR_HAS}" at)
  if(at EQUAL -1)
    string(APPEND failures "stderr does not name '${STDERR_HAS}'\n")
  endif()
endif()
if(DEFINED STDERR_LINES)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT err STREQUAL "" AND NOT err MATCHES "\n$")
    math(EXPR lines "${lines} + 1")
  endif()
  if(NOT lines EQUAL STDERR_LINES)
    string(APPEND failures "stderr has ${lines} line(s), expected ${STDERR_LINES}\n")
  endif()
endif()
if(NO_FILE AND EXISTS "${NO_FILE}")
  string(APPEND failures "${NO_FILE} was written\n")
endif()
if(failures)
  message(FATAL_ERROR "${failures}")
endif()
