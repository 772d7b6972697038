# A teacher's copy of a lesson's text in the real window (tests/ui/CMakeLists.txt,
# ui_lesson_text_*): makes a folder of copies, runs
#   FUSIONLAB_LESSON_TEXT_DUMP=dump xvfb-run fusionlab --no-gpu --lesson gelu_scale
#     [--lessons-dir DIR] --screenshot PNG
# and checks what the lesson panel laid out (app/gui/panel_lesson.cpp writes the dump) and what
# went to stderr.
#   -DFUSIONLAB=<binary> -DXVFB_RUN=<xvfb-run> -DOUT=<work folder> -DMODE=override|broken|scripted
#   override: gelu_scale.md holds a unique sentence; it must be shown, and no note.
#   broken:   gelu_scale.md is not UTF-8; the shipped text is shown with a note, stderr says so;
#             views/memory.md (the memory view's explanation) is broken too, and stderr says so.
#   scripted: the copy sits in $XDG_DATA_HOME/fusionlab/lessons and no --lessons-dir is given: a
#             screenshot run must ignore it (reproducible pictures).
foreach(var FUSIONLAB XVFB_RUN OUT MODE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "lesson_text_run.cmake needs -D${var}=...")
  endif()
endforeach()

file(REMOVE_RECURSE ${OUT})
set(dir ${OUT}/lessons)
set(args --lessons-dir ${dir})
if(MODE STREQUAL "scripted")
  set(dir ${OUT}/xdg/fusionlab/lessons)
  set(args)
endif()
file(MAKE_DIRECTORY ${dir})
set(unique "Quokka notes for Tuesday")
if(MODE STREQUAL "broken")
  # Valid text, then a byte that is never UTF-8; the same for a view's explanation.
  file(MAKE_DIRECTORY ${dir}/views)
  execute_process(COMMAND sh -c "printf '# Broken copy\\n\\nText, then \\377.\\n' > \"$0\"; cp \"$0\" \"$1\""
                          ${dir}/gelu_scale.md ${dir}/views/memory.md RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot write the broken copies")
  endif()
else()
  file(WRITE ${dir}/gelu_scale.md
    "# ${unique}\n\nOur course measures this on the *lab machines*; compare with your own GPU.\n\n"
    "## A remark\n\nThe ceiling is the byte ratio, as the shipped text explains.\n")
endif()

set(dump ${OUT}/dump.txt)
set(png ${OUT}/lesson_${MODE}.png)
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env FUSIONLAB_LESSON_TEXT_DUMP=${dump} XDG_DATA_HOME=${OUT}/xdg
          ${XVFB_RUN} -a -s "-screen 0 2560x1440x24" ${FUSIONLAB} --no-gpu --lesson gelu_scale
          ${args} --screenshot ${png}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fusionlab exited ${rc}:\n${out}\n${err}")
endif()
if(NOT EXISTS ${png})
  message(FATAL_ERROR "no screenshot ${png}")
endif()
if(NOT EXISTS ${dump})
  message(FATAL_ERROR "the lesson panel wrote no ${dump} (FUSIONLAB_LESSON_TEXT_DUMP)")
endif()
file(READ ${dump} text)
set(err "\n${err}")  # every line starts after a newline
message(STATUS "stderr:\n${err}")

# The last text the panel showed for gelu_scale: from its last "text lesson=gelu_scale" line.
string(FIND "${text}" "text lesson=gelu_scale " at REVERSE)
if(at LESS 0)
  message(FATAL_ERROR "the panel never showed gelu_scale:\n${text}")
endif()
string(SUBSTRING "${text}" ${at} -1 shown)
string(FIND "${shown}" "\ntext lesson=" next)
if(next GREATER 0)
  string(SUBSTRING "${shown}" 0 ${next} shown)
endif()
message(STATUS "shown:\n${shown}")

function(expect regex why)
  if(NOT shown MATCHES "${regex}")
    message(FATAL_ERROR "${why}: the panel's text does not match '${regex}':\n${shown}")
  endif()
endfunction()
function(expect_not regex why)
  if(shown MATCHES "${regex}")
    message(FATAL_ERROR "${why}: the panel's text matches '${regex}':\n${shown}")
  endif()
endfunction()

if(MODE STREQUAL "override")
  expect("overridden=1" "the teacher's copy is not the one shown")
  expect("\nline visible h1 ${unique}\n" "the copy's heading is not visible")
  expect("\nline visible p Our course measures" "the copy's paragraph is not visible")
  expect_not("\nnote " "a usable copy got a note")
  expect_not("GELU followed by a scale" "the shipped text is shown too")
  if(err MATCHES "gelu_scale")
    message(FATAL_ERROR "stderr names gelu_scale although its copy was used:\n${err}")
  endif()
  # The other lessons have no copy in the folder: one line says which.
  if(NOT err MATCHES "--lessons-dir [^\n]*/lessons has no relu_scale.md, [^\n]*: those lessons show the shipped text\n")
    message(FATAL_ERROR "stderr does not list the lessons without a copy:\n${err}")
  endif()
  # ... but not the views' and panels' explanations, which a teacher rarely copies.
  if(err MATCHES "views/|panels/")
    message(FATAL_ERROR "stderr names a view's or panel's text although none was copied:\n${err}")
  endif()
elseif(MODE STREQUAL "broken")
  expect("overridden=0" "a broken copy was shown")
  expect("\nnote Your copy gelu_scale.md: not valid UTF-8 \\(byte [0-9]+\\); showing the shipped text.\n"
         "no note about the broken copy")
  expect("\nline visible p GELU followed by a scale" "the shipped text is not visible")
  if(NOT err MATCHES "\nfusionlab: [^\n]*/gelu_scale.md: not valid UTF-8 \\(byte [0-9]+\\); lesson gelu_scale shows the shipped text\n")
    message(FATAL_ERROR "stderr has no one-line message about the broken copy:\n${err}")
  endif()
  if(NOT err MATCHES "\nfusionlab: [^\n]*/views/memory.md: not valid UTF-8 \\(byte [0-9]+\\); view memory shows the shipped text\n")
    message(FATAL_ERROR "stderr has no one-line message about the broken view text:\n${err}")
  endif()
elseif(MODE STREQUAL "scripted")
  expect("overridden=0" "a screenshot run used the XDG copy")
  expect("\nline visible p GELU followed by a scale" "the shipped text is not visible")
  expect_not("Quokka" "the XDG copy leaked into a screenshot run")
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
