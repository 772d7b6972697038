# glad 2 (Debian's python3-glad) ships no CMake helper, so this is ours.
#
# fusionlab_add_glad_gl(TARGET) generates an OpenGL 3.3 core loader (no extensions) at build
# time into a clean folder of the build tree, and wraps it in a static library whose include
# directory holds glad/gl.h. Generated code is never committed. We call the package's `glad`
# command: the pyenv python3 on PATH cannot import Debian's modules (`python3 -m glad` fails).
find_program(GLAD_EXECUTABLE glad HINTS /usr/bin REQUIRED
  DOC "glad 2 loader generator (Debian package python3-glad)")

function(fusionlab_add_glad_gl target)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${target}_generated)
  set(outputs ${dir}/src/gl.c ${dir}/include/glad/gl.h ${dir}/include/KHR/khrplatform.h)
  add_custom_command(OUTPUT ${outputs}
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${dir}
    # --extensions= is an empty list (all extensions when left out); --reproducible uses the
    # Khronos XML bundled with the package instead of fetching the latest.
    COMMAND ${GLAD_EXECUTABLE} --quiet --reproducible --api gl:core=3.3 --extensions=
            --out-path ${dir} c
    COMMENT "Generating the OpenGL 3.3 core loader with glad"
    VERBATIM)
  add_library(${target} STATIC ${outputs})
  target_include_directories(${target} SYSTEM PUBLIC ${dir}/include)
  target_link_libraries(${target} PUBLIC ${CMAKE_DL_LIBS})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
