# tests/fuzz/fuzz.cmake: the fuzz targets (tests/fuzz/fuzz_<parser>.c), included at the end of the
# top-level CMakeLists.txt.
#
# Every build: each target is linked with replay_main.c as replay_<parser> and ctest
# fuzz_replay_<parser> feeds it its seed corpus (corpus/<parser>/) and every committed crash input
# (regressions/<parser>/), so the regressions run in the plain and the ASan/UBSan builds.
#
# -DSPECDEC_FUZZ=ON (clang only; scripts/fuzz.sh configures build-fuzz so, as a Debug build):
# each target is linked with libFuzzer as fuzz_<parser>. The whole library is compiled with
# -fsanitize=fuzzer-no-link,address,undefined, the parsing subsystems (util, io, tok, sample,
# config, the draft vocabulary, the server's request and chat code) at -O1 and everything else
# at -O0: the targets never run the kernels, and unoptimized they compile in a fraction of the
# time. Only the fuzz targets are meant to be built there (`--target fuzz_all`).
option(SPECDEC_FUZZ "Build the libFuzzer targets (clang)" OFF)
set(SPECDEC_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer -g)
if(SPECDEC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SPECDEC_FUZZ needs clang (-DCMAKE_C_COMPILER=clang); this is ${CMAKE_C_COMPILER_ID}")
  endif()
  target_compile_options(specdec PRIVATE ${SPECDEC_FUZZ_FLAGS})
  file(GLOB SPECDEC_FUZZ_PARSER_SRC CONFIGURE_DEPENDS src/util/*.c src/io/*.c src/tok/*.c src/sample/*.c
       src/model/config.c src/speculative/draft_vocab.c tools/server/*.c)
  set_property(SOURCE ${SPECDEC_FUZZ_PARSER_SRC} APPEND PROPERTY COMPILE_OPTIONS -O1)
  # The kernels' run-time ISA checks may name CPU features clang does not know (gcc accepts more
  # __builtin_cpu_supports strings); the fuzz targets never run a kernel, so there every check
  # says no and the portable kernels would be chosen.
  file(GLOB SPECDEC_FUZZ_KERNEL_SRC CONFIGURE_DEPENDS src/cpu/*.c)
  set_property(SOURCE ${SPECDEC_FUZZ_KERNEL_SRC} APPEND PROPERTY COMPILE_OPTIONS "-D__builtin_cpu_supports(feature)=0")
  add_custom_target(fuzz_all)
endif()

file(GLOB SPECDEC_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
# the server's request parser and chat renderer: its sources less the command (serve_main.c)
file(GLOB SPECDEC_FUZZ_SERVER_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/server/*.c)
list(FILTER SPECDEC_FUZZ_SERVER_SRC EXCLUDE REGEX "serve_main\\.c$")
foreach(f ${SPECDEC_FUZZ_TARGETS})
  get_filename_component(name ${f} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" parser ${name})
  set(extra "")
  if(parser STREQUAL "request" OR parser STREQUAL "chat")
    if(NOT SPECDEC_SERVER_BUILT)
      continue()
    endif()
    set(extra ${SPECDEC_FUZZ_SERVER_SRC})
  endif()
  set(kinds replay)
  if(SPECDEC_FUZZ)
    set(kinds fuzz)
  endif()
  foreach(kind ${kinds})
    set(exe ${kind}_${parser})
    if(kind STREQUAL "replay")
      add_executable(${exe} ${f} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.c ${extra})
    else()
      add_executable(${exe} ${f} ${extra})
      target_link_options(${exe} PRIVATE -fsanitize=fuzzer,address,undefined)
      add_dependencies(fuzz_all ${exe})
    endif()
    target_include_directories(${exe} PRIVATE src tools tests/fuzz)
    target_link_libraries(${exe} PRIVATE specdec)
    if(extra)
      target_link_libraries(${exe} PRIVATE PkgConfig::MHD)
    endif()
    target_compile_definitions(${exe} PRIVATE SPECDEC_SOURCE_DIR_DEFAULT="${CMAKE_SOURCE_DIR}")
    if(SPECDEC_FUZZ)
      target_compile_options(${exe} PRIVATE ${SPECDEC_FUZZ_FLAGS})
      target_link_options(${exe} PRIVATE -fsanitize=address,undefined)
    endif()
  endforeach()
  if(SPECDEC_FUZZ)
    continue()
  endif()
  add_test(NAME fuzz_replay_${parser} COMMAND replay_${parser}
           ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${parser} ${CMAKE_SOURCE_DIR}/tests/fuzz/regressions/${parser})
  set_tests_properties(fuzz_replay_${parser} PROPERTIES ENVIRONMENT "SPECDEC_SOURCE_DIR=${CMAKE_SOURCE_DIR}" TIMEOUT 300)
endforeach()
