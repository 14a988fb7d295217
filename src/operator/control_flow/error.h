// Error reporting for the gluon_dyn ops.
#ifndef GLUON_DYN_CONTROL_FLOW_ERROR_H_
#define GLUON_DYN_CONTROL_FLOW_ERROR_H_

#include <mxnet/lib_api.h>

namespace gluon_dyn {

// lib_api keeps every MX_ERROR_MSG for the life of the process and MXNet
// prints the whole list with each later failure of an op from this library, so
// an old "assumption failed" text would show up in an unrelated error (and
// mislead anything that classifies errors by their text). Dropping the stale
// messages before adding a new one makes each error carry only its own cause.
void DropStaleErrors();

}  // namespace gluon_dyn

// Use instead of MX_ERROR_MSG.
#define GLUON_DYN_ERROR (::gluon_dyn::DropStaleErrors(), MX_ERROR_MSG)

#endif  // GLUON_DYN_CONTROL_FLOW_ERROR_H_
