# Test install_and_run_installed: `cmake --install` into a fresh prefix puts Fusion Lab in the
# freedesktop layout, and the installed binary, run from another folder, opens recordings.
#   cmake -DBUILD=DIR -DWORK=DIR [-DGUI=ON -DXVFB_RUN=PATH] -P InstallTest.cmake
# With the window (GUI and Xvfb): a marker recording, a copy of one installed session file under
# another GPU name and a later date, is put only into the prefix; `fusionlab --no-gpu` picks the
# newest recording from the first assets folder it finds, so it shows the marker only if it
# found the installed assets (<exe dir>/../share/fusionlab/assets), not the source tree's.
set(prefix ${WORK}/prefix)
set(elsewhere ${WORK}/elsewhere)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${elsewhere})

function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${elsewhere} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 200)
  message("$ ${ARGN}\nexit ${rc}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (exit ${rc}): ${ARGN}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})

# ---- the layout
set(bin ${prefix}/bin/fusionlab)
set(data ${prefix}/share)
foreach(path ${bin} ${data}/applications/fusionlab.desktop
        ${data}/icons/hicolor/scalable/apps/fusionlab.svg
        ${data}/icons/hicolor/256x256/apps/fusionlab.png
        ${data}/fusionlab/assets/lessons/catalog.json
        # the teaching texts: a lesson's, a view's and a panel's (app/gui/lesson_text.h)
        ${data}/fusionlab/assets/lessons/gelu_scale.md
        ${data}/fusionlab/assets/lessons/views/flow.md
        ${data}/fusionlab/assets/lessons/panels/measurement.md)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "not installed: ${path}")
  endif()
endforeach()
file(GLOB recordings LIST_DIRECTORIES true ${data}/fusionlab/assets/recordings/*)
file(GLOB sessions ${data}/fusionlab/assets/recordings/*/*.json)
list(LENGTH sessions session_count)
if(session_count EQUAL 0)
  message(FATAL_ERROR "no recording installed under ${data}/fusionlab/assets/recordings")
endif()
file(READ ${data}/applications/fusionlab.desktop desktop)
if(NOT desktop MATCHES "\nExec=\"${bin}\"\n" OR NOT desktop MATCHES "\nTryExec=${bin}\n"
   OR NOT desktop MATCHES "\nIcon=fusionlab\n")
  message(FATAL_ERROR "the installed .desktop file does not start ${bin} with Icon=fusionlab:\n${desktop}")
endif()
# The PNG's IHDR: width and height, 4 bytes each, after the 8-byte signature and 8 bytes of
# chunk length and type.
file(READ ${data}/icons/hicolor/256x256/apps/fusionlab.png ihdr OFFSET 16 LIMIT 8 HEX)
if(NOT ihdr STREQUAL "0000010000000100")
  message(FATAL_ERROR "the installed PNG icon is not 256x256 (IHDR size ${ihdr})")
endif()
message("layout: ${bin}, ${session_count} session files, .desktop, icons")

# ---- the installed binary, from another folder: headless, on the installed recording
list(GET recordings 0 recording)
run(${bin} export-csv ${recording} -o ${elsewhere}/installed.csv)
if(NOT out MATCHES "wrote .*installed.csv: [1-9][0-9]* rows" AND NOT err MATCHES "wrote .*installed.csv: [1-9][0-9]* rows")
  message(FATAL_ERROR "export-csv of the installed recording did not report its rows")
endif()

# ---- the installed window finds its own assets
if(NOT GUI OR NOT XVFB_RUN)
  message("the window is not tried (GUI=${GUI}, xvfb-run: '${XVFB_RUN}')")
  return()
endif()
# The window starts on gelu_scale in fp32 with a cold L2: a file that holds it.
set(session ${sessions})
list(FILTER session INCLUDE REGEX "elementwise_fp32_cold[.]json$")
if(NOT session)
  set(session ${sessions})
endif()
list(GET session 0 session)
file(READ ${session} text)
string(JSON text SET "${text}" created_utc "\"2099-01-01T00:00:00Z\"")
string(JSON text SET "${text}" device name "\"Installed Marker GPU\"")
file(WRITE ${data}/fusionlab/assets/recordings/zz-install-test-marker/marker.json "${text}")
# A settings file of its own, so nothing remembered from an earlier run changes the start.
run(${CMAKE_COMMAND} -E env XDG_CONFIG_HOME=${WORK}/config
    ${XVFB_RUN} -a -s "-screen 0 1280x720x24" ${bin} --no-gpu --screenshot ${elsewhere}/installed.png)
if(NOT "${out}${err}" MATCHES "Replaying a recording made on Installed Marker GPU on 2099-01-01")
  message(FATAL_ERROR "the installed window did not replay the recording installed beside it "
    "(${data}/fusionlab/assets): it looked elsewhere first")
endif()
file(READ ${elsewhere}/installed.png signature LIMIT 8 HEX)
if(NOT signature STREQUAL "89504e470d0a1a0a")
  message(FATAL_ERROR "the installed window wrote no PNG screenshot")
endif()
message("the installed window replayed its own assets and saved ${elsewhere}/installed.png")
