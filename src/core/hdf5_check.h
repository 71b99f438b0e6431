// HDF5 error handling: H5_CHECK turns a failed HDF5 call (negative id or status) into
// bert::Error naming the call, the file it concerns, and the source line. HDF5's own error
// stack printing is silenced by the RAII guard so failures reach the host as one message.
#pragma once

#include <hdf5.h>

#include <string>

#include "core/error.h"

namespace bert {

class Hdf5Silence {  // disables HDF5's automatic error printing for its lifetime
 public:
  Hdf5Silence() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  // Clearing the stack releases the error records a failed call left: records left on a
  // worker thread's stack keep HDF5 from closing cleanly at process exit.
  ~Hdf5Silence() {
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, func_, data_);
  }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

class Hdf5Id {  // owns an HDF5 handle and closes it with the matching H5*close
 public:
  Hdf5Id() = default;
  Hdf5Id(hid_t id, herr_t (*closer)(hid_t)) : id_(id), closer_(closer) {}
  Hdf5Id(Hdf5Id&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Hdf5Id& operator=(Hdf5Id&& o) noexcept {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = H5I_INVALID_HID;
    return *this;
  }
  ~Hdf5Id() { reset(); }
  hid_t get() const { return id_; }
  // Gives up ownership (for a close whose result must be checked).
  hid_t release() {
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*closer_)(hid_t) = nullptr;
};

}  // namespace bert

#define H5_CHECK(call, code, file)                                                              \
  ([&]() {                                                                                      \
    auto h5_result__ = (call);                                                                  \
    if (h5_result__ < 0) {                                                                      \
      ::bert::fail((code), "HDF5 call ", #call, " failed for '", (file), "' (", __FILE__, ":", \
                   __LINE__, ")");                                                              \
    }                                                                                           \
    return h5_result__;                                                                         \
  }())
