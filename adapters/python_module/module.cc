// The extension module chorus._chorus; python/chorus/__init__.py re-exports
// it as the package `chorus`.
#include <pybind11/pybind11.h>

#include <cctype>
#include <string>
#include <string_view>

#include "base/types.h"
#include "adapters/python_module/binding.h"
#include "adapters/python_module/errors.h"

namespace py = pybind11;
using chorus::DataType;
using chorus::ReduceOp;

namespace {

// Binds every member of a chorus enum, exported to the module too, under the
// name base/types.h gives it (as `spell` writes it), so the Python enums
// follow the library's own tables.
template <class Enum, class Spell>
void bind_enum(py::module_& module, const char* name, const char* doc, size_t count, Spell spell) {
  py::enum_<Enum> binding(module, name, doc);
  for (size_t i = 0; i < count; ++i) {
    const auto member = static_cast<Enum>(i);
    binding.value(spell(chorus::to_string(member)).c_str(), member);
  }
  binding.export_values();
}

// Python spells the reductions in capitals (ReduceOp.SUM).
std::string upper_case(std::string_view name) {
  std::string text(name);
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

PYBIND11_MODULE(_chorus, module) {
  module.doc() = "chorus collectives on Python buffers (numpy arrays, bytearray, memoryview, array.array)";
  chorus::python::bind_errors(module);

  bind_enum<DataType>(module, "DataType",
                      "Element types. Buffers carry their own (numpy dtype or format); pass dtype= only for "
                      "bfloat16, which numpy stores as uint16.",
                      chorus::data_type_count, [](std::string_view name) { return std::string(name); });
  bind_enum<ReduceOp>(module, "ReduceOp", "Reductions; band/bor/bxor are for integer types only.",
                      chorus::reduce_op_count, upper_case);
  module.attr("NO_COLOR") = chorus::Context::kNoColor;

  chorus::python::bind_work(module);
  py::class_<chorus::python::PyContext> context = chorus::python::bind_context(module);
  chorus::python::bind_reductions(module, context);
  chorus::python::bind_movement(module, context);
  chorus::python::bind_grouped(context);
  chorus::python::bind_registration(module);
}
