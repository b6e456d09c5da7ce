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

func hostLog(int32, string) { panic(notWasm) }

// Keep onRequest referenced: in a wasm guest the export calls it.
var _ = onRequest
