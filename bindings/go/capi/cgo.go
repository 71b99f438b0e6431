// Package capi is the SWIG-generated binding of capi/bert.h (see capi.swig); these directives
// give the generated cgo code libbert's flags from pkg-config ("bert"), plus the header's
// directory when built inside the bertengine source tree.
package capi

// #cgo pkg-config: bert
// #cgo CFLAGS: -I${SRCDIR}/../../../capi
import "C"
