// Checking the `tiller` command's arguments before anything is loaded: input
// shapes given as NAME=DxD..., whole-number options, and shape names matched
// against a model's inputs. Every refusal is a tiller::Error of kind
// kInvalidArgument (exit code 2) or a CLI11 validation message.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tiller/error.h"

namespace tiller::tools {

using ShapeMap = std::map<std::string, std::vector<int64_t>>;

// "image=16x3x64x64" -> {"image": [16, 3, 64, 64]}, one entry per argument.
// Refuses a missing '=', an empty name or shape, a dimension that is not a
// whole number, one below 1 (-1 included: a shape on the command line is what
// runs, so it must be concrete) and a name given twice.
ShapeMap ParseShapeArgs(const std::vector<std::string>& args);

// Refuses a --shape whose name is not one of `inputs`, listing them; `what`
// names their owner ("the model", "the fed variables").
void CheckShapeNames(const ShapeMap& shapes, const std::vector<std::string>& inputs,
                     const std::string& what);

// A whole number in [min, max]. CLI11's PositiveNumber checks a double
// against [DBL_MIN, DBL_MAX] and prints both bounds in full (300 digits).
CLI::Validator WholeNumber(int64_t min, int64_t max);
// A real number >= 0, said in a line.
CLI::Validator NonNegativeReal();

}  // namespace tiller::tools
