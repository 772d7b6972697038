# The shipped recording: the newest folder under assets/recordings/ (named <gpu>-<UTC date>, e.g.
# h100-2026-11-23), the one the window replays without a GPU and scripts/perf-tables.py reads.
# Tests that read it take its name and date from here, so re-making the set on a new day means
# replacing the folder, not editing tests.
#   FUSIONLAB_SHIPPED_RECORDING_NAME   h100-2026-11-23
#   FUSIONLAB_SHIPPED_RECORDING        <source>/assets/recordings/h100-2026-11-23
#   FUSIONLAB_SHIPPED_DATE             2026-11-23
#   fusionlab_shipped_recording_defines(TARGET)  the same three as C++ string macros
file(GLOB _fl_recordings LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/assets/recordings/*)
set(_fl_folders "")
foreach(_fl_entry IN LISTS _fl_recordings)
  if(IS_DIRECTORY ${_fl_entry})
    list(APPEND _fl_folders ${_fl_entry})
  endif()
endforeach()
if(NOT _fl_folders)
  message(FATAL_ERROR "no recording folder under ${PROJECT_SOURCE_DIR}/assets/recordings")
endif()
list(SORT _fl_folders)
list(GET _fl_folders -1 FUSIONLAB_SHIPPED_RECORDING)
get_filename_component(FUSIONLAB_SHIPPED_RECORDING_NAME ${FUSIONLAB_SHIPPED_RECORDING} NAME)
string(REGEX MATCH "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$" FUSIONLAB_SHIPPED_DATE
       ${FUSIONLAB_SHIPPED_RECORDING_NAME})
if(NOT FUSIONLAB_SHIPPED_DATE)
  message(FATAL_ERROR "the recording folder '${FUSIONLAB_SHIPPED_RECORDING_NAME}' does not end "
                      "in its UTC date (YYYY-MM-DD)")
endif()

function(fusionlab_shipped_recording_defines target)
  target_compile_definitions(${target} PRIVATE
    FUSIONLAB_SHIPPED_RECORDING_NAME="${FUSIONLAB_SHIPPED_RECORDING_NAME}"
    FUSIONLAB_SHIPPED_RECORDING="${FUSIONLAB_SHIPPED_RECORDING}"
    FUSIONLAB_SHIPPED_DATE="${FUSIONLAB_SHIPPED_DATE}")
endfunction()
