// include/tiller/checkpoint.h over the pickle code (pickle.h) and the state
// classification (state_roles.h).
#include <cstring>

#include "frontend/paddle/pickle.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/state_roles.h"
#include "tiller/checkpoint.h"

namespace tiller::checkpoint {

size_t ItemSize(const std::string& dtype) {
  return paddle::NumpyItemSize(dtype);
}

std::vector<HostArray> ReadPaddlePickle(const std::string& path) {
  std::vector<paddle::PickledArray> arrays = paddle::ReadArrayPickle(path);
  std::vector<HostArray> out;
  out.reserve(arrays.size());
  for (paddle::PickledArray& a : arrays) {
    HostArray h;
    h.name = std::move(a.name);
    h.dtype = std::move(a.dtype);
    h.shape = std::move(a.shape);
    h.data.resize(a.data->size());
    if (!h.data.empty()) std::memcpy(h.data.data(), a.data->data(), h.data.size());
    // Release each buffer once copied, so the peak is one copy plus one array
    // (unless the pickle shared one array under two names).
    a.data.reset();
    out.push_back(std::move(h));
  }
  return out;
}

void WritePaddlePickle(const std::string& path, const std::vector<HostArray>& arrays) {
  std::vector<paddle::ArrayView> views;
  views.reserve(arrays.size());
  for (const HostArray& a : arrays) {
    views.push_back({a.name,
                     a.dtype,
                     a.shape,
                     {reinterpret_cast<const std::byte*>(a.data.data()), a.data.size()}});
  }
  paddle::WriteArrayPickle(path, views);
}

const char* StateRoleName(StateRole role) {
  switch (role) {
    case StateRole::kParameter:
      return "parameter";
    case StateRole::kStatistic:
      return "statistic";
    case StateRole::kOptimizerState:
      return "optimizer_state";
    case StateRole::kLearningRate:
      return "learning_rate";
    case StateRole::kOther:
      return "other";
  }
  return "other";
}

const char* SaveFileSuffix(SaveFile file) {
  switch (file) {
    case SaveFile::kPdparams:
      return ".pdparams";
    case SaveFile::kPdopt:
      return ".pdopt";
    case SaveFile::kNone:
      return "";
  }
  return "";
}

// The public enums list the frontend's values in the same order.
static_assert(static_cast<int>(StateRole::kOther) == static_cast<int>(paddle::StateRole::kOther) &&
              static_cast<int>(StateRole::kLearningRate) ==
                  static_cast<int>(paddle::StateRole::kLearningRate) &&
              static_cast<int>(StateRole::kOptimizerState) ==
                  static_cast<int>(paddle::StateRole::kOptimizerState) &&
              static_cast<int>(StateRole::kStatistic) ==
                  static_cast<int>(paddle::StateRole::kStatistic));
static_assert(static_cast<int>(SaveFile::kNone) == static_cast<int>(paddle::SaveFile::kNone) &&
              static_cast<int>(SaveFile::kPdopt) == static_cast<int>(paddle::SaveFile::kPdopt));

std::vector<StateVariable> PaddleStateRoles(const std::string& program_path) {
  std::vector<StateVariable> out;
  for (const paddle::StateVariable& v :
       paddle::ClassifyState(paddle::ReadProgramFile(program_path)))
    out.push_back({v.name, static_cast<StateRole>(v.role), static_cast<SaveFile>(v.file)});
  return out;
}

}  // namespace tiller::checkpoint
