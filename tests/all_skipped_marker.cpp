// Linked into the suites that ctest runs one process per gtest suite (tern_add_gtest's
// ONE_PROCESS_PER_SUITE): at the end of the run, when no test failed, none passed and some were
// skipped, it prints the line ctest's SKIP_REGULAR_EXPRESSION looks for, so that a suite is
// reported as skipped only when every test in it skipped (e.g. no WebGPU adapter) — a failure or a
// pass beside skipped tests is reported as such.
#include <gtest/gtest.h>

#include <cstdio>

namespace {

class AllSkippedMarker : public ::testing::EmptyTestEventListener {
    void OnTestProgramEnd(const ::testing::UnitTest & run) override {
        if (run.failed_test_count() == 0 && run.successful_test_count() == 0 && run.skipped_test_count() > 0) {
            std::printf("TERN_ALL_TESTS_SKIPPED\n");
            std::fflush(stdout);
        }
    }
};

// gtest's listener list exists before main (UnitTest is a lazily made singleton), and owns what
// is appended to it.
const bool k_registered = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new AllSkippedMarker);
    return true;
}();

}  // namespace
