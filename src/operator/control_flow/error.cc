#include "error.h"

#include <mutex>
#include <sstream>
#include <vector>

namespace gluon_dyn {
namespace {

using Messages = std::vector<std::stringstream*>;
using MessagesPtr = Messages mxnet::ext::MXerrorMsgs::*;

// MXerrorMsgs has no clear(); its list is private. Explicit instantiation may
// name private members, which gives a pointer-to-member without editing the
// header MXNet ships.
MessagesPtr MessagesMember();

template <MessagesPtr member>
struct MessagesAccess {
  friend MessagesPtr MessagesMember() { return member; }
};
template struct MessagesAccess<&mxnet::ext::MXerrorMsgs::messages>;

std::mutex mutex;
// MXNet may still be reading the previous generation on another engine thread,
// so it is freed one failure later rather than at once.
Messages retired;

}  // namespace

void DropStaleErrors() {
  std::lock_guard<std::mutex> lock(mutex);
  Messages& live = mxnet::ext::MXerrorMsgs::get()->*MessagesMember();
  for (std::stringstream* s : retired) delete s;
  retired.swap(live);
  live.clear();
}

}  // namespace gluon_dyn
