package main

import "unsafe"

// Raw imports of host functions the guest SDK wraps, so that tests can
// hand the host encodings the SDK never makes.

//go:wasmimport wasmkeep storage_batch
func wkRawBatch(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep storage_list_len
func wkRawListLen(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmkeep storage_get_many_len
func wkRawGetManyLen(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmkeep sql_exec_len
func wkRawSQLExecLen(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmkeep sql_exec_read
func wkRawSQLExecRead(ptr unsafe.Pointer, n uint32) uint32

// rawSQLExec runs the encoded statement b and returns its encoded
// result.
func rawSQLExec(b []byte) []byte {
	buf := make([]byte, wkRawSQLExecLen(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))))
	wkRawSQLExecRead(unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
	return buf
}

func rawGetManyLen(b []byte) int32 {
	return wkRawGetManyLen(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}

func rawBatch(b []byte) uint32 {
	return wkRawBatch(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}

func rawListLen(b []byte) int32 {
	return wkRawListLen(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}

//go:wasmimport wasmkeep ws_accept
func wkRawAccept(ptr unsafe.Pointer, n uint32) uint32

// ws_send takes its pointer as a plain offset here, so that a test can
// pass one outside guest memory (Go's memory does not move).
//
//go:wasmimport wasmkeep ws_send
func wkRawSend(id uint64, flags uint32, ptr uint32, n uint32) uint32

//go:wasmimport wasmkeep ws_close
func wkRawClose(id uint64, code int32, ptr unsafe.Pointer, n uint32) uint32

func rawAccept(b []byte) uint32 {
	return wkRawAccept(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}

func rawSend(id uint64, flags uint32, b []byte) uint32 {
	return wkRawSend(id, flags, uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)))
}

func rawClose(id uint64, code int32, reason string) uint32 {
	return wkRawClose(id, code, unsafe.Pointer(unsafe.StringData(reason)), uint32(len(reason)))
}

// rawSendOutOfRange hands ws_send a buffer past the end of guest memory.
func rawSendOutOfRange(id uint64) {
	wkRawSend(id, 1, 0xfffffff0, 64)
}

//go:wasmimport wasmkeep ws_dial
func wkRawDial(ptr unsafe.Pointer, n uint32) int64

func rawDial(b []byte) int64 {
	return wkRawDial(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}
