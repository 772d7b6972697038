# Makes the bad session files that `fusionlab --replay` must refuse, at test time in the build
# folder (nothing of this kind is committed). Each is refused with one stderr line naming the
# file and the problem, and a failing exit, before any window opens.
#
#   cmake -DGOOD=a-real-session.json -DOUT=folder -P make_bad_sessions.cmake
if(NOT GOOD OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DGOOD=SESSION.json -DOUT=FOLDER -P make_bad_sessions.cmake")
endif()
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
file(READ "${GOOD}" good)

# Not JSON at all (a hand edit gone wrong).
file(WRITE "${OUT}/malformed.json" "{\"format\": \"fusionlab-session\", \"schema_version\": 1, oops}\n")
# The first half of a real session (a copy cut short).
string(LENGTH "${good}" length)
math(EXPR half "${length} / 2")
string(SUBSTRING "${good}" 0 ${half} truncated)
file(WRITE "${OUT}/truncated.json" "${truncated}")
# A real session from a future schema.
string(JSON wrong_version SET "${good}" schema_version 99)
file(WRITE "${OUT}/wrong_version.json" "${wrong_version}")
# Valid JSON, but not a session.
file(WRITE "${OUT}/not_a_session.json" "{\"hello\": \"world\"}\n")
# A session with nothing in it to replay.
string(JSON no_measurements SET "${good}" measurements "[]")
file(WRITE "${OUT}/no_measurements.json" "${no_measurements}")
# A session of another GPU, to be refused next to the real one.
string(JSON other_gpu SET "${good}" device name "\"NVIDIA H200\"")
file(WRITE "${OUT}/other_gpu.json" "${other_gpu}")
# Over the 256 MiB limit: a sparse file, so it costs no disk; the reader must refuse it by its
# size without reading it.
file(WRITE "${OUT}/oversized.json" "{")
execute_process(COMMAND truncate -s 257M "${OUT}/oversized.json" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cannot make the oversized file with truncate: ${rc}")
endif()
