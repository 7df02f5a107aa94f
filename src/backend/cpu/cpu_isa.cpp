// CPU feature detection (CPUID + XGETBV on x86-64, HWCAP on ARM64) and the kernel-set choice.
#include "backend/cpu/cpu_isa.h"

#include "backend/cpu/cpu_kernels.h"
#include "core/error.h"

#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace tern {
namespace {

struct Features {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
    bool asimd = false, dotprod = false;
};

Features detect() {
    Features f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1;
    f.fma              = (c >> 12) & 1;
    f.f16c             = (c >> 29) & 1;
    const bool avx     = (c >> 28) & 1;
    uint64_t   xcr0    = 0;
    if (osxsave) {
        unsigned lo = 0, hi = 0;
        __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
    }
    const bool os_avx    = (xcr0 & 0x6) == 0x6;     // XMM and YMM state
    const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;   // plus opmask and ZMM state
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2       = avx && os_avx && ((b >> 5) & 1);
        f.avx512f    = os_avx512 && ((b >> 16) & 1);
        f.avx512dq   = os_avx512 && ((b >> 17) & 1);
        f.avx512bw   = os_avx512 && ((b >> 30) & 1);
        f.avx512vl   = os_avx512 && ((b >> 31) & 1);
        f.avx512vnni = os_avx512 && ((c >> 11) & 1);
    }
    f.fma  = f.fma && os_avx;
    f.f16c = f.f16c && os_avx;
#endif
#if defined(__aarch64__)
    f.asimd = true;
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    f.dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
#endif
    return f;
}

const Features & features() {
    static const Features f = detect();
    return f;
}

const cpu::Kernels * kernels_of(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::avx2: return cpu::kernels_avx2();
        case CpuIsa::avx512: return cpu::kernels_avx512();
        case CpuIsa::neon: return cpu::kernels_neon();
        default: return nullptr;
    }
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::automatic: return "auto";
        case CpuIsa::ref: return "ref";
        case CpuIsa::avx2: return "avx2";
        case CpuIsa::avx512: return "avx512";
        case CpuIsa::neon: return "neon";
    }
    return "?";
}

std::optional<CpuIsa> cpu_isa_from_name(std::string_view name) {
    for (CpuIsa i : {CpuIsa::automatic, CpuIsa::ref, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::neon}) {
        if (cpu_isa_name(i) == name) return i;
    }
    return std::nullopt;
}

bool cpu_isa_available(CpuIsa isa) {
    const Features & f = features();
    switch (isa) {
        case CpuIsa::automatic: case CpuIsa::ref: return true;
        case CpuIsa::avx2: return kernels_of(isa) && f.avx2 && f.fma && f.f16c;
        case CpuIsa::avx512:
            return kernels_of(isa) && f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
                   f.avx512vnni;
        case CpuIsa::neon: return kernels_of(isa) && f.asimd && f.dotprod;
    }
    return false;
}

CpuIsa cpu_isa_best() {
    for (CpuIsa i : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::neon}) {
        if (cpu_isa_available(i)) return i;
    }
    return CpuIsa::ref;
}

CpuIsa cpu_isa_resolve(CpuIsa requested) {
    std::string from = "the CPU kernel choice";
    if (requested == CpuIsa::automatic) {
        const char * env = std::getenv("TERN_CPU_ISA");
        if (env == nullptr || *env == '\0') return cpu_isa_best();
        const auto parsed = cpu_isa_from_name(env);
        if (!parsed) {
            fail(ErrorKind::invalid_argument, format("TERN_CPU_ISA=%s is not a CPU kernel set", env),
                 "use auto, ref, avx2, avx512 or neon");
        }
        if (*parsed == CpuIsa::automatic) return cpu_isa_best();
        requested = *parsed;
        from      = format("TERN_CPU_ISA=%s", env);
    }
    if (!cpu_isa_available(requested)) {
        fail(ErrorKind::unsupported,
             format("%s asks for the %s kernels, which this CPU or build cannot run (CPU features: %s)", from.c_str(),
                    std::string(cpu_isa_name(requested)).c_str(), cpu_feature_list().c_str()),
             format("the best set here is %s", std::string(cpu_isa_name(cpu_isa_best())).c_str()));
    }
    return requested;
}

std::string cpu_feature_list() {
    const Features & f = features();
    std::string      s;
    auto add = [&](bool on, const char * name) {
        if (!on) return;
        if (!s.empty()) s += ' ';
        s += name;
    };
    add(f.avx2, "avx2");
    add(f.fma, "fma");
    add(f.f16c, "f16c");
    add(f.avx512f, "avx512f");
    add(f.avx512bw, "avx512bw");
    add(f.avx512vl, "avx512vl");
    add(f.avx512dq, "avx512dq");
    add(f.avx512vnni, "avx512vnni");
    add(f.asimd, "asimd");
    add(f.dotprod, "dotprod");
    return s.empty() ? "none" : s;
}

namespace cpu {
namespace {
// cpu README, "A line ahead": Intel's cores (session 18's Xeon VM) stream the one-token kernels at
// the read loop's rate only with it; AMD's Zen 5 lost with every per-line prefetch tried.
int64_t default_line_ahead() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e) return 4096;  // "GenuineIntel"
#endif
    return 0;
}

// The byte count in environment variable `name`, or `fallback` where it is unset or empty.
int64_t env_bytes(const char * name, int64_t fallback) {
    const char * env = std::getenv(name);
    if (env == nullptr || *env == 0) return fallback;
    char *          end = nullptr;
    const long long v   = std::strtoll(env, &end, 10);
    if (*end != 0 || v < 0) fail(ErrorKind::invalid_argument, format("%s=%s: want a byte count >= 0", name, env));
    return v;
}
}  // namespace

int64_t page_ahead = 8192;                  // cpu README, "A page ahead"
int64_t line_ahead = default_line_ahead();  // cpu README, "A line ahead"

void set_stream_ahead_from_env() {
    const int64_t page = env_bytes("TERN_CPU_PAGE_AHEAD", page_ahead);
    const int64_t line = env_bytes("TERN_CPU_LINE_AHEAD", line_ahead);
    page_ahead         = page;
    line_ahead         = line;
}
}  // namespace cpu

}  // namespace tern
