//go:build !linux

package wasmhost

import "errors"

// newAllocator returns nil where mappings are not implemented: memories
// are Go slices, as wazero makes them by default.
func newAllocator() allocator { return nil }

// image is not implemented: modules keep their data segments.
type image struct{}

func newImage([]segment, uint64) (*image, error) { return nil, errors.ErrUnsupported }

// Close does nothing.
func (*image) Close() {}

func (*image) readInto([]byte) bool { return false }
