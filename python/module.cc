// The extension module chorus._chorus; python/chorus/__init__.py re-exports
// it as the package `chorus`.
#include <pybind11/pybind11.h>

#include "base/types.h"
#include "python/binding.h"
#include "python/errors.h"

namespace py = pybind11;
using chorus::DataType;
using chorus::ReduceOp;

PYBIND11_MODULE(_chorus, module) {
  module.doc() = "chorus collectives on Python buffers (numpy arrays, bytearray, memoryview, array.array)";
  chorus::python::bind_errors(module);

  py::enum_<DataType>(module, "DataType",
                      "Element types. Buffers carry their own (numpy dtype or format); pass dtype= only for "
                      "bfloat16, which numpy stores as uint16.")
      .value("int8", DataType::int8)
      .value("uint8", DataType::uint8)
      .value("int32", DataType::int32)
      .value("uint32", DataType::uint32)
      .value("int64", DataType::int64)
      .value("uint64", DataType::uint64)
      .value("float16", DataType::float16)
      .value("bfloat16", DataType::bfloat16)
      .value("float32", DataType::float32)
      .value("float64", DataType::float64)
      .export_values();
  py::enum_<ReduceOp>(module, "ReduceOp", "Reductions; band/bor/bxor are for integer types only.")
      .value("SUM", ReduceOp::sum)
      .value("PROD", ReduceOp::prod)
      .value("MIN", ReduceOp::min)
      .value("MAX", ReduceOp::max)
      .value("AVG", ReduceOp::avg)
      .value("BAND", ReduceOp::band)
      .value("BOR", ReduceOp::bor)
      .value("BXOR", ReduceOp::bxor)
      .export_values();
  module.attr("NO_COLOR") = chorus::Context::kNoColor;

  chorus::python::bind_work(module);
  py::class_<chorus::python::PyContext> context = chorus::python::bind_context(module);
  chorus::python::bind_reductions(module, context);
  chorus::python::bind_movement(module, context);
}
