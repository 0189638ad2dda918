#include "compile/trace.h"

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"

namespace tiller::compile {

TraceRecorder::TraceRecorder(size_t max_events) : epoch_(Clock::now()), max_events_(max_events) {}

int TraceRecorder::Lane(const std::string& lane) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < lanes_.size(); ++i) {
    if (lanes_[i] == lane) return static_cast<int>(i);
  }
  lanes_.push_back(lane);
  return static_cast<int>(lanes_.size() - 1);
}

void TraceRecorder::Add(int lane, std::string name, const char* category, Clock::time_point start,
                        Clock::time_point end) {
  const double start_us = std::chrono::duration<double, std::micro>(start - epoch_).count();
  const double dur_us = std::chrono::duration<double, std::micro>(end - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back({lane, std::move(name), category, start_us, dur_us});
}

size_t TraceRecorder::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

void TraceRecorder::Write(const std::string& path) const {
  std::string out = "{\"traceEvents\": [\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < lanes_.size(); ++i) {
      out += fmt::format(
          "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": {}, "
          "\"args\": {{\"name\": {}}}}},\n",
          i, JsonString(lanes_[i]));
      out += fmt::format(
          "{{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": 0, \"tid\": {}, "
          "\"args\": {{\"sort_index\": {}}}}},\n",
          i, i);
    }
    for (const Event& e : events_) {
      out += fmt::format(
          "{{\"ph\": \"X\", \"name\": {}, \"cat\": \"{}\", \"pid\": 0, \"tid\": {}, "
          "\"ts\": {:.3f}, \"dur\": {:.3f}}},\n",
          JsonString(e.name), e.category, e.lane, e.start_us, e.dur_us);
    }
    out += fmt::format(
        "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": "
        "{{\"name\": \"tiller ({} events dropped)\"}}}}\n]}}\n",
        dropped_);
  }
  AtomicFile file(path, "trace");
  file.Write(out.data(), out.size());
  file.Commit();
}

TraceFileGuard::~TraceFileGuard() {
  if (!trace_) return;
  try {
    trace_->Write(path_);
  } catch (const Error&) {
  }
}

}  // namespace tiller::compile
