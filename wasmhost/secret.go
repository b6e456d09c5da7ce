package wasmhost

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
)

// The host side of secret_len and secret_read (ABI.md, Secrets): a guest
// reads one of the node's application secrets through actors.Secret. A
// secret's value is never logged, nor put in an error: the host keeps it
// in the event for secret_read only.

// maxSecretName bounds the name secret_len looks up: a longer one names
// no secret (the node's secrets have names of 1 to 128 bytes).
const maxSecretName = 128

// secretNone is secret_len's answer when there is no such secret.
const secretNone = -1

func secretFunctions(fn hostFunc) {
	// secret_len(name, name_len) -> i32: the size of the secret's value,
	// kept for secret_read, or -1 if the node has no such secret.
	fn("secret_len", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ev.secret = nil
		n := api.DecodeU32(stack[1])
		if n == 0 || n > maxSecretName {
			stack[0] = api.EncodeI32(secretNone)
			return
		}
		name := read(mod, api.DecodeU32(stack[0]), n)
		v, err := actors.Secret(ctx, string(name))
		if err != nil {
			stack[0] = api.EncodeI32(secretNone)
			return
		}
		stack[0] = keep(&ev.secret, v, secretNone)
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// secret_read(ptr, len) -> i32: copies the value of the last
	// secret_len into the buffer.
	fn("secret_read", readKept(func(ev *event) *[]byte { return &ev.secret }), []api.ValueType{i32, i32}, []api.ValueType{i32})
}
