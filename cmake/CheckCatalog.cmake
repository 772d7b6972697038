# Test catalog_json_is_current: `fusionlab lessons --json` must write exactly the committed
# assets/lessons/catalog.json, which the replay-only build compiles in.
#   cmake -DFUSIONLAB=BIN -DCOMMITTED=FILE -DOUT=FILE -P CheckCatalog.cmake
execute_process(COMMAND ${FUSIONLAB} lessons --json OUTPUT_FILE ${OUT} RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "`fusionlab lessons --json` failed (exit ${rc}): ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${COMMITTED} RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  execute_process(COMMAND diff -u ${COMMITTED} ${OUT} OUTPUT_VARIABLE diff ERROR_QUIET)
  string(SUBSTRING "${diff}" 0 3000 diff)
  message(FATAL_ERROR "${COMMITTED} is not what `fusionlab lessons --json` writes now:\n${diff}\n"
    "If the lessons in kernels/ changed, rewrite it from a CUDA build and commit it:\n"
    "  build/fusionlab lessons --json > assets/lessons/catalog.json")
endif()
message("${COMMITTED} is what `fusionlab lessons --json` writes")
