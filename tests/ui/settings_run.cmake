# Runs the window with XDG_CONFIG_HOME pointing at a fresh folder that holds a prepared settings
# file, then checks what the window said and what the file holds afterwards.
#
#   cmake -DDIR=FOLDER -DCASE=corrupt|oversized|remembered|untouched -P settings_run.cmake --
#         COMMAND [ARGS...]
#
# corrupt: a file with a bad line is ignored with one stderr line naming it and the line, the
#   window starts from the defaults and rewrites the file when it closes (with --use-settings).
# oversized: a file over 64 KiB, the same.
# remembered: lesson, view, precision, panel sizes and window size are read (the picture has the
#   remembered size) and written back unchanged.
# untouched: without --use-settings a --screenshot run neither reads nor writes the file.
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

file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}/fusionlab")
set(settings "${DIR}/fusionlab/settings.ini")
if(CASE STREQUAL "corrupt")
  file(WRITE "${settings}" "version = 1\nwidth = wide\nheight = 700\nlesson = ffn\n")
elseif(CASE STREQUAL "oversized")
  string(REPEAT "# padding padding padding padding padding padding padding padding\n" 1100 pad)
  file(WRITE "${settings}" "version = 1\nlesson = ffn\n${pad}")
elseif(CASE STREQUAL "remembered")
  file(WRITE "${settings}" "version = 1\nwidth = 1100\nheight = 700\nlesson = residual_layernorm\n"
    "view = memory\nprecision = bf16\ncache = cold\nleft_width = 0.3000\n"
    "measurement_height = 0.2500\nsplit = false\n")
elseif(CASE STREQUAL "untouched")
  file(WRITE "${settings}" "version = 1\nlesson = ffn\n")
else()
  message(FATAL_ERROR "settings_run.cmake: unknown CASE '${CASE}'")
endif()
file(READ "${settings}" before)

execute_process(COMMAND ${CMAKE_COMMAND} -E env "XDG_CONFIG_HOME=${DIR}" ${command}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 220)
message("exit: ${rc}\n--- stdout ---\n${out}--- stderr ---\n${err}--------------")
set(failures "")
if(NOT rc EQUAL 0)
  string(APPEND failures "exit was '${rc}', expected 0\n")
endif()
file(READ "${settings}" after)
message("--- settings afterwards ---\n${after}--------------")
# The window's own line about the recording it replays (no GPU here) is not about settings.
string(REGEX REPLACE "fusionlab: Replaying a recording made on [^\n]*\n" "" err "${err}")

if(CASE STREQUAL "corrupt" OR CASE STREQUAL "oversized")
  if(CASE STREQUAL "corrupt")
    set(why "settings.ini: line 2: width is a whole number of pixels, got 'wide'")
  else()
    set(why "settings.ini is [0-9]+ bytes, over the 64 KiB a settings file can be")
  endif()
  if(NOT err MATCHES "^fusionlab: ignoring the settings file: [^\n]*${why} \\(it is rewritten when the window closes\\)\n$")
    string(APPEND failures "stderr is not the one line about the ignored settings file\n")
  endif()
  # Ignored as a whole: the lesson in it (ffn) was not used, and the new file is whole.
  if(NOT after MATCHES "\nlesson = gelu_scale\n" OR NOT after MATCHES "^# Fusion Lab settings")
    string(APPEND failures "the settings file was not rewritten from the defaults\n")
  endif()
elseif(CASE STREQUAL "remembered")
  foreach(line "width = 1100" "height = 700" "lesson = residual_layernorm" "view = memory"
               "precision = bf16" "left_width = 0.3000" "measurement_height = 0.2500")
    string(FIND "${after}" "\n${line}\n" at)
    if(at LESS 0)
      string(APPEND failures "'${line}' was not remembered\n")
    endif()
  endforeach()
  if(NOT err STREQUAL "")
    string(APPEND failures "stderr should be empty\n")
  endif()
elseif(CASE STREQUAL "untouched")
  if(NOT before STREQUAL after)
    string(APPEND failures "a --screenshot run without --use-settings changed the settings file\n")
  endif()
endif()
if(failures)
  message(FATAL_ERROR "${failures}")
endif()
