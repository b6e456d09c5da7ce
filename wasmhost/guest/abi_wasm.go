//go:build wasip1 && wasm

package guest

import (
	"unsafe"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The guest ABI, version 1 (wasmhost/ABI.md). Pointers are offsets in the
// guest's linear memory; the host never writes to guest memory except into
// a buffer the guest passed to it, for the length the guest gave.

//go:wasmimport wasmkeep request_len
func wkRequestLen() uint32

//go:wasmimport wasmkeep request_read
func wkRequestRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep response_write
func wkResponseWrite(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep storage_get_len
func wkStorageGetLen(key unsafe.Pointer, keyLen uint32) int32

//go:wasmimport wasmkeep storage_get_read
func wkStorageGetRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep storage_put
func wkStoragePut(key unsafe.Pointer, keyLen uint32, val unsafe.Pointer, valLen uint32) uint32

//go:wasmimport wasmkeep storage_delete
func wkStorageDelete(key unsafe.Pointer, keyLen uint32)

//go:wasmimport wasmkeep storage_list_len
func wkStorageListLen(opts unsafe.Pointer, optsLen uint32) int32

//go:wasmimport wasmkeep storage_list_read
func wkStorageListRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep storage_batch
func wkStorageBatch(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep log
func wkLog(level int32, msg unsafe.Pointer, msgLen uint32)

//go:wasmexport wasmkeep_abi_version
func exportABIVersion() uint32 { return wire.Version }

//go:wasmexport wasmkeep_on_request
func exportOnRequest() int32 { return onRequest() }

func bytesPtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func stringPtr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

func requestLen() uint32 { return wkRequestLen() }

func requestRead(b []byte) { wkRequestRead(bytesPtr(b), uint32(len(b))) }

func responseWrite(b []byte) uint32 { return wkResponseWrite(bytesPtr(b), uint32(len(b))) }

func storageGetLen(key string) int32 { return wkStorageGetLen(stringPtr(key), uint32(len(key))) }

func storageGetRead(b []byte) { wkStorageGetRead(bytesPtr(b), uint32(len(b))) }

func storagePut(key string, value []byte) uint32 {
	return wkStoragePut(stringPtr(key), uint32(len(key)), bytesPtr(value), uint32(len(value)))
}

func storageDelete(key string) { wkStorageDelete(stringPtr(key), uint32(len(key))) }

func storageListLen(opts []byte) int32 { return wkStorageListLen(bytesPtr(opts), uint32(len(opts))) }

func storageListRead(b []byte) { wkStorageListRead(bytesPtr(b), uint32(len(b))) }

func storageBatch(b []byte) uint32 { return wkStorageBatch(bytesPtr(b), uint32(len(b))) }

func hostLog(level int32, msg string) { wkLog(level, stringPtr(msg), uint32(len(msg))) }
