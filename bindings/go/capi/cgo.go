// Package capi is the SWIG-generated binding of capi/bert.h (see capi.swig; bert.h here is a
// link to it, so that Go's build cache sees when the header changes). These directives
// give the generated cgo code the header of this source tree and link libbert from the
// tree's meson build directory `build` with an rpath to it, so programs run without
// LD_LIBRARY_PATH. Elsewhere (an installed libbert, another build directory) CGO_CFLAGS and
// CGO_LDFLAGS add their own -I, -L and -Wl,-rpath flags, which take precedence.
package capi

// #cgo CFLAGS: -I${SRCDIR}/../../../capi
// #cgo LDFLAGS: -L${SRCDIR}/../../../build -Wl,-rpath,${SRCDIR}/../../../build -lbert
import "C"
