package main

import "unsafe"

// Raw imports of host functions the guest SDK wraps, so that tests can
// hand the host encodings the SDK never makes.

//go:wasmimport wasmkeep storage_batch
func wkRawBatch(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep storage_list_len
func wkRawListLen(ptr unsafe.Pointer, n uint32) int32

func rawBatch(b []byte) uint32 {
	return wkRawBatch(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}

func rawListLen(b []byte) int32 {
	return wkRawListLen(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}
