//go:build wasip1 && wasm

package guest

import (
	"unsafe"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The guest ABI, version 2 (wasmhost/ABI.md). Pointers are offsets in the
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

//go:wasmimport wasmkeep storage_delete_all
func wkStorageDeleteAll() uint32

//go:wasmimport wasmkeep storage_get_many_len
func wkStorageGetManyLen(keys unsafe.Pointer, keysLen uint32) int32

//go:wasmimport wasmkeep storage_get_many_read
func wkStorageGetManyRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep sql_exec_len
func wkSQLExecLen(stmt unsafe.Pointer, stmtLen uint32) uint32

//go:wasmimport wasmkeep sql_exec_read
func wkSQLExecRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep event_rollback
func wkEventRollback()

//go:wasmimport wasmkeep log
func wkLog(level int32, msg unsafe.Pointer, msgLen uint32)

//go:wasmimport wasmkeep event_actor_len
func wkEventActorLen() uint32

//go:wasmimport wasmkeep event_actor_read
func wkEventActorRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmexport wasmkeep_abi_version
func exportABIVersion() uint32 { return wire.Version }

//go:wasmexport wasmkeep_abi_minor
func exportABIMinor() uint32 { return wire.Minor }

//go:wasmexport wasmkeep_on_alarm
func exportOnAlarm(actor uint64) int32 {
	enter(actor)
	return onAlarm()
}

//go:wasmimport wasmkeep alarm_set
func wkAlarmSet(name unsafe.Pointer, nameLen uint32, atMs int64) int32

//go:wasmimport wasmkeep alarm_get
func wkAlarmGet(name unsafe.Pointer, nameLen uint32) int64

//go:wasmimport wasmkeep alarm_delete
func wkAlarmDelete(name unsafe.Pointer, nameLen uint32) int32

//go:wasmimport wasmkeep alarm_list_len
func wkAlarmListLen() uint32

//go:wasmimport wasmkeep alarm_list_read
func wkAlarmListRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep alarm_event_len
func wkAlarmEventLen() uint32

//go:wasmimport wasmkeep alarm_event_read
func wkAlarmEventRead(ptr unsafe.Pointer, n uint32) uint32

func alarmSet(name string, atMs int64) int32 {
	return wkAlarmSet(stringPtr(name), uint32(len(name)), atMs)
}

func alarmGet(name string) int64 { return wkAlarmGet(stringPtr(name), uint32(len(name))) }

func alarmDelete(name string) int32 { return wkAlarmDelete(stringPtr(name), uint32(len(name))) }

func alarmListLen() uint32 { return wkAlarmListLen() }

func alarmListRead(b []byte) { wkAlarmListRead(bytesPtr(b), uint32(len(b))) }

func alarmEventLen() uint32 { return wkAlarmEventLen() }

func alarmEventRead(b []byte) { wkAlarmEventRead(bytesPtr(b), uint32(len(b))) }

//go:wasmexport wasmkeep_isolation
func exportIsolation() uint32 { return uint32(isolation) }

//go:wasmexport wasmkeep_on_request
func exportOnRequest(actor uint64) int32 {
	enter(actor)
	return onRequest()
}

//go:wasmexport wasmkeep_on_leave
func exportOnLeave(actor uint64) int32 { return leave(actor) }

func eventActorLen() uint32 { return wkEventActorLen() }

func eventActorRead(b []byte) { wkEventActorRead(bytesPtr(b), uint32(len(b))) }

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

func storageDeleteAll() uint32 { return wkStorageDeleteAll() }

func storageGetManyLen(keys []byte) int32 {
	return wkStorageGetManyLen(bytesPtr(keys), uint32(len(keys)))
}

func storageGetManyRead(b []byte) { wkStorageGetManyRead(bytesPtr(b), uint32(len(b))) }

func sqlExecLen(stmt []byte) uint32 { return wkSQLExecLen(bytesPtr(stmt), uint32(len(stmt))) }

func sqlExecRead(b []byte) { wkSQLExecRead(bytesPtr(b), uint32(len(b))) }

func eventRollback() { wkEventRollback() }

func hostLog(level int32, msg string) { wkLog(level, stringPtr(msg), uint32(len(msg))) }

//go:wasmimport wasmkeep ws_accept
func wkWSAccept(tags unsafe.Pointer, tagsLen uint32) uint32

//go:wasmimport wasmkeep ws_send
func wkWSSend(id uint64, flags uint32, ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep ws_broadcast
func wkWSBroadcast(tag unsafe.Pointer, tagLen uint32, flags uint32, ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep ws_close
func wkWSClose(id uint64, code int32, reason unsafe.Pointer, reasonLen uint32) uint32

//go:wasmimport wasmkeep ws_list_len
func wkWSListLen(tag unsafe.Pointer, tagLen uint32) int32

//go:wasmimport wasmkeep ws_list_read
func wkWSListRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep ws_attachment_set
func wkWSAttachmentSet(id uint64, ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep ws_attachment_len
func wkWSAttachmentLen(id uint64) int32

//go:wasmimport wasmkeep ws_attachment_read
func wkWSAttachmentRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport wasmkeep ws_auto_response
func wkWSAutoResponse(req unsafe.Pointer, reqLen uint32, resp unsafe.Pointer, respLen uint32) uint32

//go:wasmimport wasmkeep ws_last_auto_response
func wkWSLastAutoResponse(id uint64) int64

//go:wasmimport wasmkeep socket_event_len
func wkSocketEventLen() uint32

//go:wasmimport wasmkeep socket_event_read
func wkSocketEventRead(ptr unsafe.Pointer, n uint32) uint32

//go:wasmexport wasmkeep_on_socket
func exportOnSocket(actor uint64) int32 {
	enter(actor)
	return onSocket()
}

func wsAccept(tags []byte) uint32 { return wkWSAccept(bytesPtr(tags), uint32(len(tags))) }

func wsSend(id uint64, flags uint32, data []byte) {
	wkWSSend(id, flags, bytesPtr(data), uint32(len(data)))
}

func wsBroadcast(tag string, flags uint32, data []byte) {
	wkWSBroadcast(stringPtr(tag), uint32(len(tag)), flags, bytesPtr(data), uint32(len(data)))
}

func wsClose(id uint64, code int32, reason string) uint32 {
	return wkWSClose(id, code, stringPtr(reason), uint32(len(reason)))
}

func wsListLen(tag string) int32 { return wkWSListLen(stringPtr(tag), uint32(len(tag))) }

func wsListRead(b []byte) { wkWSListRead(bytesPtr(b), uint32(len(b))) }

func wsAttachmentSet(id uint64, data []byte) uint32 {
	return wkWSAttachmentSet(id, bytesPtr(data), uint32(len(data)))
}

func wsAttachmentLen(id uint64) int32 { return wkWSAttachmentLen(id) }

func wsAttachmentRead(b []byte) { wkWSAttachmentRead(bytesPtr(b), uint32(len(b))) }

func wsAutoResponse(req, resp string) uint32 {
	return wkWSAutoResponse(stringPtr(req), uint32(len(req)), stringPtr(resp), uint32(len(resp)))
}

func wsLastAutoResponse(id uint64) int64 { return wkWSLastAutoResponse(id) }

func socketEventLen() uint32 { return wkSocketEventLen() }

func socketEventRead(b []byte) { wkSocketEventRead(bytesPtr(b), uint32(len(b))) }

//go:wasmimport wasmkeep actor_call
func wkActorCall(target unsafe.Pointer, targetLen uint32, req unsafe.Pointer, reqLen uint32) int32

//go:wasmimport wasmkeep actor_call_read
func wkActorCallRead(ptr unsafe.Pointer, n uint32) uint32

func actorCall(target, req []byte) int32 {
	return wkActorCall(bytesPtr(target), uint32(len(target)), bytesPtr(req), uint32(len(req)))
}

func actorCallRead(b []byte) { wkActorCallRead(bytesPtr(b), uint32(len(b))) }

//go:wasmimport wasmkeep http_fetch
func wkHTTPFetch(req unsafe.Pointer, reqLen uint32) int32

//go:wasmimport wasmkeep http_fetch_read
func wkHTTPFetchRead(ptr unsafe.Pointer, n uint32) uint32

func httpFetch(req []byte) int32 { return wkHTTPFetch(bytesPtr(req), uint32(len(req))) }

func httpFetchRead(b []byte) { wkHTTPFetchRead(bytesPtr(b), uint32(len(b))) }

//go:wasmimport wasmkeep secret_len
func wkSecretLen(name unsafe.Pointer, nameLen uint32) int32

//go:wasmimport wasmkeep secret_read
func wkSecretRead(ptr unsafe.Pointer, n uint32) uint32

func secretLen(name string) int32 { return wkSecretLen(stringPtr(name), uint32(len(name))) }

func secretRead(b []byte) { wkSecretRead(bytesPtr(b), uint32(len(b))) }

//go:wasmimport wasmkeep ws_dial
func wkWSDial(req unsafe.Pointer, reqLen uint32) int64

func wsDial(req []byte) int64 { return wkWSDial(bytesPtr(req), uint32(len(req))) }
