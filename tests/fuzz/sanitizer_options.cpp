// Defaults for the sanitizers' runtimes in the fuzz executables, read at start (UBSAN_OPTIONS and
// ASAN_OPTIONS still override them).
// UBSan, abort_on_error: a report ends in SIGABRT, which the tests catch to save the mutant in
// flight and name its seed and iteration (fuzz_common.h); the runtime's own death callback is not
// reached from UBSan when it runs beside AddressSanitizer.
extern "C" const char* __ubsan_default_options() {
  return "abort_on_error=1:print_stacktrace=1";
}
// ASan, detect_leaks=0: LeakSanitizer stops the world with ptrace, which some CI containers
// forbid ("LeakSanitizer has encountered a fatal error"); these tests hunt crashes, overflows and
// undefined behaviour. ASAN_OPTIONS=detect_leaks=1 turns it back on where ptrace is allowed.
extern "C" const char* __asan_default_options() {
  return "detect_leaks=0";
}
