// The IpuOptions registry's table (include/tiller/ipu_options.h): every
// option of Paddle's IpuStrategy, PopART's session options and Tiller's
// own, each with its default (Paddle's from
// paddle/fluid/platform/device/ipu/ipu_strategy.h) and what Tiller does
// with it. IpuOptions::Specs() is the table, built once; ipu_options.cc
// sets and reads the options through it; scripts/gen_migration.py
// documents it in docs/MIGRATION.md.
#pragma once

#include <string>
#include <vector>

#include "tiller/ipu_options.h"

namespace tiller::runtime {

// Every option, sorted by name.
std::vector<training::OptionSpec> MakeIpuOptionSpecs();

// A location_* setting as the group's dict spells it: 1 or 0 for a bool,
// else the integer.
std::string LocationWord(const training::OptionValue& v);

// `stored` with the key of each option "<group>.<key>" set to its value
// (value_of(spec)) as the group's dict spells it.
template <typename ValueOf>
training::OptionMap WithLocationKeys(const std::vector<training::OptionSpec>& specs,
                                     const std::string& group, training::OptionMap stored,
                                     ValueOf value_of) {
  const std::string prefix = group + ".";
  for (const training::OptionSpec& s : specs) {
    if (s.name.starts_with(prefix))
      stored[s.name.substr(prefix.size())] = LocationWord(value_of(s));
  }
  return stored;
}

}  // namespace tiller::runtime
