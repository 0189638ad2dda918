// Refuses, with a message, to run on a CPU below the level this build's code
// is compiled for (core/cpu_isa.h), instead of dying on an illegal
// instruction in whatever code runs first. This file alone is compiled for
// the x86-64 baseline (CMakeLists.txt), and its check runs as the library's
// first static initializer (constructor priority 101, before every default
// one), so no instruction of the build's level has run yet. It calls no
// code compiled for the build's level: it reads cpu_isa.cc's constant
// kCompiledIsaLevel and the feature table (data), and the cpuid probes it
// defines below (which cpu_isa.cc calls too). Like TensorFlow's CPU feature guard, it
// ends the process (exit code 2): the library cannot load on this CPU.
#include <unistd.h>

#include <cstdio>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/cpu_isa_features.h"

namespace tiller {

extern const int kCompiledIsaLevel;

namespace {

#if defined(__x86_64__)
__attribute__((constructor(101))) void RefuseACpuBelowTheBuild() {
  const int level = kCompiledIsaLevel;
  if (level <= static_cast<int>(IsaLevel::kX86_64)) return;
  char missing[512] = "";
  size_t at = 0;
  for (const Feature& f : kFeatures)
    if (static_cast<int>(f.level) <= level && !CpuHasFeature(f))
      at += static_cast<size_t>(std::snprintf(
          missing + at, at < sizeof missing ? sizeof missing - at : 0, " %s", f.name));
  const unsigned long long need = kXcr0ForLevel[level];
  const bool saved = (OsSavedStates() & need) == need;
  if (at == 0 && saved) return;
  std::fprintf(stderr,
               "tiller: this build's code is compiled for %s (the -march of the machine it was "
               "built on) and this CPU cannot run it:%s%s. Build Tiller on this machine, or "
               "install the wheel (x86-64-v3, scripts/build_wheel.sh).\n",
               kIsaLevelNames[level], at ? " it lacks" : "",
               at ? missing : " the OS does not save its vector registers");
  std::fflush(stderr);
  _exit(2);
}
#endif

}  // namespace

// The probes cpu_isa.cc uses too (cpu_isa_features.h): compiled here, for
// the baseline, they run on any CPU.
bool CpuHasFeature(const Feature& f) {
#if defined(__x86_64__)
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(f.leaf, f.subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[f.reg] >> f.bit) & 1u;
#else
  (void)f;
  return false;
#endif
}

uint64_t OsSavedStates() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return 0;  // no OSXSAVE
  unsigned lo = 0, hi = 0;
  // xgetbv by its bytes: no -mxsave needed.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
#else
  return 0;
#endif
}

}  // namespace tiller
