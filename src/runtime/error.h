// Errors inside the runtime: thrown as gd::Error, turned into a message and a NULL / -1
// return at the C API boundary (api.cc).
#ifndef GLUON_DYN_RUNTIME_ERROR_H_
#define GLUON_DYN_RUNTIME_ERROR_H_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gd {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "(2, 3)", as Python prints a shape.
std::string shape_text(const std::vector<int64_t> &shape);

}  // namespace gd

#endif  // GLUON_DYN_RUNTIME_ERROR_H_
