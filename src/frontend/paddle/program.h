// A Paddle program as read from disk, in one neutral form for both file
// formats. The PIR reader maps Paddle 3 op names, operands and attribute
// names onto the legacy ProgramDesc spelling (op_compat), so translation is
// written once per op against legacy names and slots.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "ir/attribute.h"

namespace tiller::paddle {

struct VarInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape dims;  // -1 marks a dynamic dim
  bool persistable = false;
  bool is_dense_tensor = true;  // false for feed/fetch lists and other non-tensor vars
  // What paddle.static.save decides by (state_roles.cc). is_parameter:
  // legacy VarDesc.is_parameter (a Python Parameter), PIR: the result of a
  // builtin.parameter op. need_check_feed: legacy VarDesc.need_check_feed
  // (a paddle.static.data input). var_type: legacy VarType.Type (7 =
  // DENSE_TENSOR, 9 FEED_MINIBATCH, 10 FETCH_LIST, 15 READER); the PIR
  // reader leaves 7.
  bool is_parameter = false;
  bool need_check_feed = false;
  int64_t var_type = 7;
};

// One slot ("X", "Y", "Out") and the variable names bound to it.
using Slot = std::pair<std::string, std::vector<std::string>>;

struct OpDesc {
  std::string type;  // legacy spelling, e.g. "matmul_v2", "elementwise_add"
  std::vector<Slot> inputs;
  std::vector<Slot> outputs;
  ir::AttrMap attrs;
  int index = 0;  // position in block 0, for messages

  // Variable names bound to a slot; empty when the slot is absent.
  const std::vector<std::string>& Inputs(const std::string& slot) const;
  const std::vector<std::string>& Outputs(const std::string& slot) const;
  bool HasInput(const std::string& slot) const { return !Inputs(slot).empty(); }
  // "matmul_v2 #12 (out: linear_1.tmp_0)": how messages name the op.
  std::string Describe() const;
};

struct Program {
  std::string path;         // the file it was read from
  std::string format;       // "pdmodel" (legacy ProgramDesc) or "pir" (Paddle 3 JSON)
  std::vector<OpDesc> ops;  // block 0, program order; feed/fetch ops removed
  std::map<std::string, VarInfo> vars;
  std::vector<std::string> feed_names;   // by feed `col`
  std::vector<std::string> fetch_names;  // by fetch `col`
  // Persistable variables in the order their records appear in a combined
  // .pdiparams file (sorted by name).
  std::vector<std::string> param_names;

  const VarInfo* FindVar(const std::string& name) const;
};

struct ParamTensor {
  DType dtype = DType::kF32;
  Shape dims;
  std::shared_ptr<AlignedBuffer> data;
};

using ParamMap = std::map<std::string, ParamTensor>;

// Readers. All throw tiller::Error naming the file (and record/op) on
// missing, truncated or corrupt input.
Program ReadProgramDesc(const std::string& path);  // model.pdmodel / __model__
Program ReadPirProgram(const std::string& path);   // model.json
// A .json (PIR) or .pdmodel/__model__ (ProgramDesc) file, told apart by
// extension or, failing that, by content.
Program ReadProgramFile(const std::string& path);

// Where a loaded model's parameter records lie in their files, so a
// predictor can let go of the loaded bytes once its compiled kernels hold
// packed copies of them (compile/executable.cc), and read them again to
// compile for new input shapes. Thread-safe: a predictor's clones share it.
class ParamSource {
 public:
  struct Record {
    std::string file;
    uint64_t offset = 0;  // of the record in `file`
    size_t index = 0;     // in the file, for messages
  };
  // Holds `params`' bytes (taking them) until LetGo().
  ParamSource(const std::map<std::string, Record>& records, ParamMap& params);
  // The bytes of `name`: held, or held by someone still (a compiled graph),
  // or read again from the file. Throws naming the file if it changed since
  // it was loaded.
  std::shared_ptr<AlignedBuffer> Get(const std::string& name);
  // Keeps only weak references: bytes nothing else holds are freed.
  void LetGo();

 private:
  struct Entry {
    Record record;
    ParamTensor declared;  // dtype and dims as loaded (data null)
    std::shared_ptr<AlignedBuffer> held;
    std::weak_ptr<AlignedBuffer> seen;
    uint64_t origin = 0;
  };
  struct FileStamp {
    uint64_t size = 0;
    int64_t mtime = 0;
  };
  static FileStamp Stamp(const std::string& file);
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, FileStamp> files_;
};

// Combined .pdiparams: one record per name in `names`, in that order; the
// file must end exactly after the last one. `records`: where each lies.
ParamMap ReadCombinedParams(const std::string& path, const std::vector<std::string>& names,
                            std::map<std::string, ParamSource::Record>* records = nullptr);
// Directory form: one file per parameter, named after it.
ParamMap ReadSeparateParams(const std::string& dir, const std::vector<std::string>& names,
                            std::map<std::string, ParamSource::Record>* records = nullptr);

// A program and its weights, checked against each other (count, dtype, shape).
struct Model {
  Program program;
  ParamMap params;
  // Set by MoveParamsToSource: the parameters' bytes live there (and
  // params' data are null).
  std::shared_ptr<ParamSource> source;
  std::map<std::string, ParamSource::Record> records;  // filled by LoadModel

  // Parameter `name`'s bytes, wherever they are.
  std::shared_ptr<AlignedBuffer> ParamData(const std::string& name) const;
  // Moves the parameters' bytes into `source` (before the model is shared);
  // a no-op for a model without records. Then source->LetGo() frees what
  // compiled kernels copied.
  void MoveParamsToSource();
};
// model_path: a .pdmodel, a .json, or a directory holding __model__ (or
// model.pdmodel/model.json + model.pdiparams). params_path may be empty when
// it can be derived (same stem + .pdiparams, or the directory form).
Model LoadModel(const std::string& model_path, const std::string& params_path);

}  // namespace tiller::paddle
