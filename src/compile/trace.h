// Execution traces in the Chrome / Perfetto trace-event format (open the
// file in ui.perfetto.dev or chrome://tracing): one lane per device (its
// segments: forward, backward, update, with the micro-batch they ran),
// one lane of copies and one of collectives per replica. Gaps in a device's
// lane are idle time, so a pipeline that stalls shows.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace tiller::compile {

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  // Events beyond `max_events` are dropped (and counted).
  explicit TraceRecorder(size_t max_events = 500000);

  // The lane's id (created on first use, named `lane`).
  int Lane(const std::string& lane);
  // A complete event on `lane` from `start` to `end`. Thread-safe.
  void Add(int lane, std::string name, const char* category, Clock::time_point start,
           Clock::time_point end);
  size_t size() const;
  // Writes every event so far as a trace-event JSON file (atomically).
  void Write(const std::string& path) const;

 private:
  struct Event {
    int lane;
    std::string name;
    const char* category;
    double start_us, dur_us;
  };
  mutable std::mutex mu_;
  Clock::time_point epoch_;
  size_t max_events_;
  size_t dropped_ = 0;
  std::vector<std::string> lanes_;
  std::vector<Event> events_;
};

// Writes a trace (when there is one) to `path` as it goes out of scope:
// after a run, failed ones included. A failed write is dropped, so it cannot
// hide the run's own error.
class TraceFileGuard {
 public:
  TraceFileGuard(const TraceRecorder* trace, const std::string& path)
      : trace_(trace), path_(path) {}
  ~TraceFileGuard();
  TraceFileGuard(const TraceFileGuard&) = delete;
  TraceFileGuard& operator=(const TraceFileGuard&) = delete;

 private:
  const TraceRecorder* trace_;
  const std::string& path_;
};

}  // namespace tiller::compile
