// Notes to the user on stderr, once per process: what Tiller did that a
// user would want to know about but that is no error (devices sharing
// cores, a slow half type). Under an MPI launcher rank 0 alone prints them.
#pragma once

#include <string>

#include "compile/options.h"

namespace tiller::runtime {

// Whether this process prints notes: rank 0 of an MPI job (Open MPI's,
// PMIx's or PMI's rank variable), or a process outside one.
bool IsMainProcess();

// Prints "tiller: note: <message>" on stderr the first time `key` is noted
// in this process (thread-safe); later calls with the key print nothing.
void NoteOnce(const std::string& key, const std::string& message);

// The threads of each of `devices` CPU devices sharing `threads`: an equal
// share, and at least one: with fewer threads than devices every device
// still gets one and they take turns on the cores (Paddle's IPU scripts
// ask for more IPUs than a CPU has cores), which is said once. `setting`
// names where the thread count came from in the note.
int ThreadsPerDevice(int threads, int devices, const std::string& setting);

// The devices that run a Paddle IPU program's IPUs (IpuStrategy training,
// Config::EnableIpu inference), each with `threads` threads: one per IPU,
// of the backend Tiller maps IPUs to (CPU devices today; one place to
// change when another backend takes them).
compile::DeviceSpec IpuDeviceSpec(int threads);

}  // namespace tiller::runtime
