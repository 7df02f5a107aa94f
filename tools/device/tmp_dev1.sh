set -u
. tools/device/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== focused tests"
timeout 200 $B/tern_webgpu_tests --gtest_brief=1 --gtest_filter='*BlockMax*:*NormStat*:WebGpuModel*' 2>&1 | tail -6
echo "== MAX_KEEP=1 (should fail)"
TERN_WEBGPU_CONST=MAX_KEEP=1 timeout 60 $B/tern_webgpu_tests --gtest_brief=1 --gtest_filter='*BlockMax*' 2>&1 | grep -v '^Google Test trace\|^/work' | tail -8
$B/tern synth bitnet-2b4t -o /tmp/s.gguf --seed 1 >/dev/null 2>&1
echo "== md5"
$B/tern run -m /tmp/s.gguf -p The -n 300 --temp 0 --backend webgpu 2>/dev/null | md5sum
TERN_WEBGPU_MAX_STATS=0 $B/tern run -m /tmp/s.gguf -p The -n 300 --temp 0 --backend webgpu 2>/dev/null | md5sum
echo "== ab"
tools/device/webgpu_ab.sh 3 tern tern:TERN_WEBGPU_MAX_STATS=0
