# The expected seconds of the slow tests, as ctest's COST property. `ctest -j N` starts tests in
# descending cost. After a run it keeps each test's measured time in
# build/Testing/Temporary/CTestCostData.txt, but a clean checkout (CI) has none, and without costs
# ctest starts tests in the order they were registered: the WebGPU model tests and the browser page
# come late, and a 100-s test started last leaves the other core idle while it runs (session 17's
# full run: ctest 1,020 s wall for 1,977 s of tests on 2 cores). A COST set here wins over the
# measured one; the list only needs the order roughly right.
#
# Seconds on the 2-core Intel Xeon VM (the gpu-labelled tests on SwiftShader), every test of 3 s or
# more in session 17's full run; the seven bounded in session 18 (WebGpuDecodeStream, WebGpuHfParity,
# two WebGpuModel, WebGpuFamily.TinyModels) from session 18's run divided by 1.26 (the other tests'
# ratio between the two runs). Refresh from a full run with:
#   awk 'NF==3 && $3>=3 {printf "%s %.0f\n", $1, $3}' build/Testing/Temporary/CTestCostData.txt | sort -k2 -rn
# and write each line as tern_cost(<name> <seconds>) below.
function(tern_cost name seconds)
    set_tests_properties(${name} PROPERTIES COST ${seconds})
endfunction()

# tern_webgpu_tests runs one process per gtest suite (tests/gtest_suites.cmake): its suites' costs are the
# sum of their tests' in session 20's run, x 0.8 (pipelines compiled once per suite; WebGpuModel's three shards x 0.7).
# The other binaries' tests are one process each.
tern_cost([==[WebGpuModel.*/1of3]==] 95)
tern_cost([==[WebGpuModel.*/2of3]==] 95)
tern_cost([==[WebGpuModel.*/3of3]==] 95)
tern_cost([==[WebGpuFamily.*]==] 102)
tern_cost([==[Models/WebGpuHfParity.*]==] 77)
tern_cost([==[Types/WebGpuFamilyHead.*]==] 70)
tern_cost([==[WebGpuDecodeStream.*]==] 63)
tern_cost([==[WebGpuExactHead.*]==] 54)
tern_cost([==[WebGpu/BackendOps.*]==] 50)
tern_cost([==[Paged/PagedOps.*]==] 49)
tern_cost([==[WebGpuGemm.*]==] 46)
tern_cost([==[WebGpuHeadBatch.*]==] 38)
tern_cost([==[WebGpuLongOneQueryAttention.*]==] 34)
tern_cost([==[WebGpuSample.*]==] 27)
tern_cost([==[WebGpuBatch.*]==] 27)
tern_cost([==[Types/WebGpuFamilyDecode.*]==] 23)
tern_cost([==[Shapes/WebGpuPromptAttention.*]==] 19)
tern_cost([==[WebGpuAttentionSuperblocks.*]==] 18)
tern_cost([==[WebGpuPromptBlockOrder.*]==] 18)
tern_cost([==[WebGpuOps.*]==] 14)
tern_cost([==[PagedBlockOrder.*]==] 10)
tern_cost([==[WebGpuBlockOrderOneQuery.*]==] 9)
tern_cost([==[WebGpuBatchAhead.*]==] 7)
tern_cost([==[WebGpuShaders.*]==] 6)
tern_cost([==[WebGpuLongOneQueryBlockOrder.*]==] 3)

tern_cost([==[tern_web_page_webgpu]==] 96)
tern_cost([==[tern_server_bad_input]==] 42)
tern_cost([==[tern_server_batched_equals_alone]==] 41)
tern_cost([==[ProgressTty.BarsOnATerminal]==] 34)
tern_cost([==[tern_web_wasm_engine]==] 28)
tern_cost([==[tern_web_wasm_engine_jspi]==] 24)
tern_cost([==[Cli.BenchCountsWebGpuDispatchesPerDecodeStep]==] 14)
tern_cost([==[Cli.BenchJson]==] 11)
tern_cost([==[Cli.BenchReportsBytesBandwidthAndRoofline]==] 11)
tern_cost([==[Readme.EveryExampleRunsAsWritten]==] 11)
tern_cost([==[ProgressTty.NoBarsInLogs]==] 10)
tern_cost([==[tern_server_soak]==] 10)
tern_cost([==[Cli.BenchParallel]==] 9)
tern_cost([==[tern_server_openai_client]==] 8)
tern_cost([==[tern_web_page]==] 8)
tern_cost([==[Cli.BenchAsRun]==] 7)
tern_cost([==[ModelForward.DecodeEqualsFullRecomputePastOneSuperblock]==] 5)
tern_cost([==[tern_server_chat_page]==] 5)
tern_cost([==[Isa/CpuHead.BoundedHeadsGiveTheExactHeadsAnswers/avx2]==] 4)
tern_cost([==[Isa/CpuHead.BoundedHeadsGiveTheExactHeadsAnswers/avx512]==] 4)
tern_cost([==[tern_server_replicas]==] 4)
