# Run after a suite binary is built (tern_add_gtest's ONE_PROCESS_PER_SUITE): lists its gtest
# suites (`--gtest_list_tests`) and writes OUT, a ctest file with one test per suite, which runs
# the binary with --gtest_filter=<suite>.* (or, for a suite named in SHARDS as <suite>=<n>, n tests
# <suite>.*/<i>of<n>, each one of n gtest shards). One process per suite instead of per test: on SwiftShader each
# process compiles the WGSL pipelines it uses (tens of ms to ~1 s each), and a suite's tests share
# most of theirs.
# Inputs (-D): EXE, OUT, WORKDIR, LABELS (comma-separated), SHARDS (comma-separated <suite>=<n>).
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing ERROR_VARIABLE err
                RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}): ${err}")
endif()
string(REPLACE ";" "," listing "${listing}")  # (a parameter's printed value may hold ';')
string(REPLACE "\n" ";" lines "${listing}")
string(REPLACE "," ";" labels "${LABELS}")
string(REPLACE "," ";" shard_list "${SHARDS}")
set(text "# Written by tests/gtest_suites.cmake from ${EXE} --gtest_list_tests\n")
set(n_suites 0)
foreach(line IN LISTS lines)
    # A suite's line starts in column 0 and ends its name with '.' (tests are indented below it).
    if(NOT line MATCHES "^([A-Za-z0-9_/]+)\\.")
        continue()
    endif()
    set(suite "${CMAKE_MATCH_1}")
    math(EXPR n_suites "${n_suites} + 1")
    set(shards 1)
    foreach(entry IN LISTS shard_list)
        if(entry MATCHES "^${suite}=([0-9]+)$")
            set(shards "${CMAKE_MATCH_1}")
        endif()
    endforeach()
    math(EXPR last "${shards} - 1")
    foreach(i RANGE ${last})
        set(env "TERN_CACHE_DIR=")
        set(test_name "${suite}.*")
        if(shards GREATER 1)
            math(EXPR shown "${i} + 1")
            set(test_name "${suite}.*/${shown}of${shards}")  # (no spaces: ctest keeps no cost for those)
            set(env "${env};GTEST_TOTAL_SHARDS=${shards};GTEST_SHARD_INDEX=${i}")  # (a list: one variable each)
        endif()
        string(APPEND text "add_test([==[${test_name}]==] \"${EXE}\" [==[--gtest_filter=${suite}.*]==])\n"
               "set_tests_properties([==[${test_name}]==] PROPERTIES WORKING_DIRECTORY \"${WORKDIR}\" "
               "LABELS \"${labels}\" ENVIRONMENT \"${env}\" SKIP_REGULAR_EXPRESSION TERN_ALL_TESTS_SKIPPED)\n")
    endforeach()
endforeach()
if(n_suites EQUAL 0)
    message(FATAL_ERROR "${EXE} --gtest_list_tests listed no suite")
endif()
file(WRITE "${OUT}" "${text}")
