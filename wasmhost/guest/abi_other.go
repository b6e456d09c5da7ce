//go:build !(wasip1 && wasm)

package guest

// Outside a wasm guest there is no host: these stand-ins let the package
// compile for go vet and go build of the whole module, and panic if called.

const notWasm = "guest: not running as a wasm guest (build with GOOS=wasip1 GOARCH=wasm)"

func requestLen() uint32 { panic(notWasm) }

func requestRead([]byte) { panic(notWasm) }

func responseWrite([]byte) uint32 { panic(notWasm) }

func storageGetLen(string) int32 { panic(notWasm) }

func storageGetRead([]byte) { panic(notWasm) }

func storagePut(string, []byte) uint32 { panic(notWasm) }

func storageDelete(string) { panic(notWasm) }

func storageListLen([]byte) int32 { panic(notWasm) }

func storageListRead([]byte) { panic(notWasm) }

func storageBatch([]byte) uint32 { panic(notWasm) }

func storageDeleteAll() uint32 { panic(notWasm) }

func storageGetManyLen([]byte) int32 { panic(notWasm) }

func storageGetManyRead([]byte) { panic(notWasm) }

func sqlExecLen([]byte) uint32 { panic(notWasm) }

func sqlExecRead([]byte) { panic(notWasm) }

func eventRollback() { panic(notWasm) }

func hostLog(int32, string) { panic(notWasm) }

func wsAccept([]byte) uint32 { panic(notWasm) }

func wsSend(uint64, uint32, []byte) { panic(notWasm) }

func wsBroadcast(string, uint32, []byte) { panic(notWasm) }

func wsClose(uint64, int32, string) uint32 { panic(notWasm) }

func wsListLen(string) int32 { panic(notWasm) }

func wsListRead([]byte) { panic(notWasm) }

func wsAttachmentSet(uint64, []byte) uint32 { panic(notWasm) }

func wsAttachmentLen(uint64) int32 { panic(notWasm) }

func wsAttachmentRead([]byte) { panic(notWasm) }

func wsAutoResponse(string, string) uint32 { panic(notWasm) }

func wsLastAutoResponse(uint64) int64 { panic(notWasm) }

func socketEventLen() uint32 { panic(notWasm) }

func socketEventRead([]byte) { panic(notWasm) }

func eventActorLen() uint32 { panic(notWasm) }

func eventActorRead([]byte) { panic(notWasm) }

// Keep what the exports call referenced: in a wasm guest they do.
var _, _, _, _ = onRequest, onSocket, enter, leave

func actorCall([]byte, []byte) int32 { panic(notWasm) }

func actorCallRead([]byte) { panic(notWasm) }

func httpFetch([]byte) int32 { panic(notWasm) }

func httpFetchRead([]byte) { panic(notWasm) }

func secretLen(string) int32 { panic(notWasm) }

func secretRead([]byte) { panic(notWasm) }

func wsDial([]byte) int64 { panic(notWasm) }

func alarmSet(string, int64) int32 { panic(notWasm) }

func alarmGet(string) int64 { panic(notWasm) }

func alarmDelete(string) int32 { panic(notWasm) }

func alarmListLen() uint32 { panic(notWasm) }

func alarmListRead([]byte) { panic(notWasm) }

func alarmEventLen() uint32 { panic(notWasm) }

func alarmEventRead([]byte) { panic(notWasm) }
