# `cmake --install BUILD [--prefix DIR]`: Fusion Lab in the freedesktop layout.
#   bin/fusionlab
#   share/fusionlab/assets/            recordings (and lesson assets): the installed binary looks
#                                      here first, <exe dir>/../share/fusionlab/assets
#   share/applications/fusionlab.desktop   Exec= the installed binary's absolute path
#   share/icons/hicolor/scalable/apps/fusionlab.svg, .../256x256/apps/fusionlab.png
# Fonts come from the system. The full build's binary keeps an RPATH to the CUDA toolkit's
# libraries (libcupti, libcublasLt) where it was built; the replay-only build needs none.
include(GNUInstallDirs)

if(FUSIONLAB_WITH_CUDA)
  # Folders of the shared libraries linked from outside the project (the toolkit's lib/) go into
  # the installed binary's RUNPATH, as they are in the build tree's.
  set_target_properties(fusionlab PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
endif()
install(TARGETS fusionlab RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/fusionlab/assets
  PATTERN icons EXCLUDE)

install(FILES ${PROJECT_SOURCE_DIR}/assets/icons/fusionlab.svg
  DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
install(FILES ${PROJECT_SOURCE_DIR}/assets/icons/fusionlab.png
  DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/256x256/apps)

# The .desktop file gets the binary's absolute path at install time, so it is right for the
# prefix given to `cmake --install --prefix`, not only the one configured.
set(FUSIONLAB_DESKTOP_IN ${PROJECT_SOURCE_DIR}/packaging/fusionlab.desktop)
set(FUSIONLAB_DESKTOP_OUT ${PROJECT_BINARY_DIR}/packaging/fusionlab.desktop)
install(CODE "
  set(_fl_bin \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/fusionlab\")
  file(READ \"${FUSIONLAB_DESKTOP_IN}\" _fl_desktop)
  string(REGEX REPLACE \"\\nExec=fusionlab\" \"\\nExec=\\\"\${_fl_bin}\\\"\" _fl_desktop \"\${_fl_desktop}\")
  string(REGEX REPLACE \"\\nTryExec=fusionlab\" \"\\nTryExec=\${_fl_bin}\" _fl_desktop \"\${_fl_desktop}\")
  file(WRITE \"${FUSIONLAB_DESKTOP_OUT}\" \"\${_fl_desktop}\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/applications\"
    TYPE FILE FILES \"${FUSIONLAB_DESKTOP_OUT}\")
")
